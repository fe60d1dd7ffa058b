"""Text that is not text, through a real node with auth on: a lone UTF-16 surrogate anywhere in a
JSON body, bytes that are not UTF-8, digits of other scripts in integers, header lines past the
parser's limit and non-ASCII tokens. Each gets a 4xx problem+json (never a 500) and changes
nothing: no record, no user, no password."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.http_api.conftest import Http, Reply
from tests.http_api.test_bad_input import assert_problem
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

BOB_PASSWORD = "bobs-password-1"
SURROGATE = "\ud800"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("bad-text")), *AUTH_ARGS, "--request-body-bytes-max",
                     "1048576") as process:
        yield process


@pytest.fixture(scope="module")
def token(http: Http) -> dict[str, str]:
    headers = bearer(login(http, ADMIN, ADMIN_PASSWORD))
    http.json("POST", "/v1/topics", 201, body={"name": "texts", "partitions": 2}, headers=headers)
    http.json("POST", "/v1/topics", 201, body={"name": "texts-q", "kind": "queue"}, headers=headers)
    http.json("POST", "/v1/users", 201, body={"username": "bob", "password": BOB_PASSWORD}, headers=headers)
    return headers


def state(http: Http, token: dict[str, str]) -> tuple[object, ...]:
    """What a refused request must not change."""
    ends = [p["log_end_offset"] for t in ("texts", "texts-q")
            for p in http.json("GET", f"/v1/topics/{t}", headers=token)["partitions"]]
    users = sorted(u["name"] for u in http.json("GET", "/v1/users", headers=token)["users"])
    return tuple(ends), tuple(users)


def raw_json(http: Http, method: str, path: str, text: str, headers: dict[str, str]) -> Reply:
    """``text`` sent as is: ``\\ud800`` escapes stay escapes (json.dumps would write them too)."""
    return http.call(method, path, raw=text.encode("utf-8", "surrogatepass"), content_type="application/json",
                     headers=headers)


ESCAPED = "\\ud800"  # the six characters of a JSON escape
BODIES = [
    ("POST", "/v1/topics/texts/records", '{"records": [{"value": "' + ESCAPED + '"}]}'),
    ("POST", "/v1/topics/texts/records", '{"records": [{"key": "a\\udc00b", "value": "v"}]}'),
    ("POST", "/v1/topics/texts/records", '{"records": [{"value": "v", "headers": [["' + ESCAPED + '", "x"]]}]}'),
    ("POST", "/v1/topics/texts/records", '{"records": [{"value": "v", "headers": [["h", "' + ESCAPED + '"]]}]}'),
    ("POST", "/v1/topics/texts/records", '{"records": [{"value": "v", "headers": {"' + ESCAPED + '": "x"}}]}'),
    ("POST", "/v1/topics/texts/records", '{"records": [{"value": "v"}], "' + ESCAPED + '": 1}'),
    ("POST", "/v1/topics/texts/records", '{"records": [{"value": "' + SURROGATE + '"}]}'),  # raw, not escaped
    ("POST", "/v1/queues/texts-q/messages", '{"records": [{"value": "' + ESCAPED + '"}]}'),
    ("POST", "/v1/users", '{"username": "eve", "password": "' + ESCAPED * 8 + '"}'),
    ("POST", "/v1/users", '{"username": "eve' + ESCAPED + '", "password": "long-enough-password"}'),
    ("PUT", "/v1/users/bob/password", '{"password": "' + ESCAPED * 8 + '"}'),
    ("POST", "/v1/topics", '{"name": "texts-2", "config": {"' + ESCAPED + '": 1}}'),
]


@pytest.mark.parametrize(("method", "path", "text"), BODIES)
def test_a_lone_surrogate_is_a_400_and_changes_nothing(http, token, method, path, text):
    before = state(http, token)
    problem = assert_problem(raw_json(http, method, path, text, token), 400)
    assert problem["code"] == "invalid_request"
    assert state(http, token) == before
    assert login(http, "bob", BOB_PASSWORD)


@pytest.mark.parametrize("text", [
    '{"username": "admin", "password": "' + ESCAPED + '"}',
    '{"username": "' + ESCAPED + '", "password": "x"}',
])
def test_login_needs_no_token_to_be_refused_with_a_400(http, token, text):
    assert_problem(raw_json(http, "POST", "/v1/auth/token", text, {}), 400)


@pytest.mark.parametrize("raw", [b'{"records": [{"value": "\xff"}]}', b'{"records": [{"value": "\xed\xa0\x80"}]}',
                                 b'\xfe\xff\x00{'])
def test_a_body_that_is_not_utf8_is_a_400(http, token, raw):
    before = state(http, token)
    reply = http.call("POST", "/v1/topics/texts/records", raw=raw, content_type="application/json", headers=token)
    assert_problem(reply, 400)
    assert state(http, token) == before


def test_escaped_surrogate_pairs_are_text(http, token):
    text = '{"records": [{"value": "\\ud83d\\ude00", "partition": 0, "headers": [["\\ud83d\\udc4d", "ok"]]}]}'
    offset = http.json("POST", "/v1/topics/texts/records", raw=text.encode(), content_type="application/json",
                       headers=token)["offsets"][0]["offset"]
    record = http.json("GET", f"/v1/topics/texts/partitions/0/records?offset={offset}", headers=token)["records"][0]
    assert record["value"] == "\U0001f600" and record["headers"] == [{"name": "\U0001f44d", "value": "ok"}]


pieces = st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr))
texts = st.lists(pieces, max_size=6).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts, field=st.sampled_from(["key", "value", "header name", "header value"]))
def test_any_text_is_stored_as_text_or_refused_whole(http, token, text, field):
    record: dict[str, object] = {"value": "v", "partition": 1}
    if field in ("key", "value"):
        record[field] = text
    else:
        record["headers"] = [[text, "x"] if field == "header name" else ["h", text]]
    body = json.dumps({"records": [record]})  # lone surrogates become \ud800-style escapes
    decoded = json.loads(body)["records"][0]  # what the node sees: adjacent pairs join
    try:
        json.dumps(decoded, ensure_ascii=False).encode("utf-8")
        is_text = True
    except UnicodeEncodeError:
        is_text = False
    before = state(http, token)
    reply = http.call("POST", "/v1/topics/texts/records", raw=body.encode(), content_type="application/json",
                      headers=token)
    if not is_text:
        assert_problem(reply, 400)
        assert state(http, token) == before
        return
    assert reply.status == 200, reply.data[:300]
    offset = reply.json()["offsets"][0]["offset"]
    got = http.json("GET", f"/v1/topics/texts/partitions/1/records?offset={offset}&max_records=1", headers=token)
    stored = got["records"][0]
    if field in ("key", "value"):
        assert stored[field] == decoded[field]
    else:
        (name, value), = decoded["headers"]
        assert stored["headers"] == [{"name": name, "value": value}]


# ---- integers of other scripts -----------------------------------------------------------------

SUPERSCRIPT_ONE = "%C2%B9"  # passes str.isdigit, fails int()
ARABIC_INDIC_ZERO = "%D9%A0"  # int() takes it as 0


@pytest.mark.parametrize("path", [
    f"/v1/topics/texts/partitions/{SUPERSCRIPT_ONE}/records?offset=0",
    f"/v1/topics/texts/partitions/{ARABIC_INDIC_ZERO}/records?offset=0",
    f"/v1/topics/texts/partitions/{ARABIC_INDIC_ZERO}/offsets",
    f"/v1/topics/texts/partitions/{ARABIC_INDIC_ZERO}/stream",
    f"/v1/topics/texts/partitions/0/records?offset={ARABIC_INDIC_ZERO}",
    f"/v1/topics/texts/partitions/0/records?offset=0&max_records={SUPERSCRIPT_ONE}",
    "/v1/topics/texts/partitions/0/records?offset=+1",
    "/v1/topics/texts/partitions/0/records?offset=1_0",
    "/v1/topics/texts/partitions/+0/records?offset=0",
])
def test_integers_are_ascii_digits(http, token, path):
    assert assert_problem(http.call("GET", path, headers=token), 400)["code"] == "invalid_request"


@pytest.mark.parametrize("resume", ["\u00b9".encode().decode("latin-1"), "\u0660".encode().decode("latin-1"), "1e3"])
def test_a_resumed_stream_needs_an_ascii_offset(http, token, resume):
    reply = http.call("GET", "/v1/topics/texts/partitions/0/stream", headers={**token, "Last-Event-ID": resume})
    assert_problem(reply, 400)


def test_a_prebuilt_batch_needs_an_ascii_partition(http, token):
    before = state(http, token)
    reply = http.call("POST", f"/v1/topics/texts/records?partition={ARABIC_INDIC_ZERO}", raw=b"x" * 80,
                      content_type="application/vnd.logbroker.batch", headers=token)
    assert_problem(reply, 400)
    assert state(http, token) == before


# ---- headers and request lines ---------------------------------------------------------------

def test_a_100_kb_authorization_header_is_a_problem_json_400(http):
    reply = http.call("GET", "/v1/topics", headers={"Authorization": "Bearer " + "x" * 100_000})
    problem = assert_problem(reply, 400)
    assert "x" * 100 not in problem["detail"], "the refused bytes are not echoed"


def test_a_token_that_is_not_ascii_is_a_401(http):
    assert_problem(http.call("GET", "/v1/topics", headers={"Authorization": "Bearer \xff\xfe.\xe9"}), 401)


def test_a_request_line_that_is_not_http_is_a_problem_json_400(http):
    with socket.create_connection((http.host, http.port), timeout=10) as connection:
        connection.sendall(b"GARBAGE\x00 / HTTP/1.1\r\n\r\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.") and b" 400 " in head.split(b"\r\n")[0]
    assert b"content-type: application/problem+json" in head.lower()
    assert json.loads(body)["status"] == 400
