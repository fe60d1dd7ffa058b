"""Authentication, ownership and ACLs through real HTTP against a node with auth on."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, JWT_KID, JWT_SECRET, METRICS_TOKEN, bearer, login
from tests.support.nodes import NodeProcess

PASSWORD = "password-of-a-user"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("auth")), *AUTH_ARGS) as process:
        yield process


class As:
    """Calls as one user: the token goes in every request."""

    def __init__(self, http: Http, token: str) -> None:
        self.http, self.token = http, token

    def call(self, method: str, path: str, **kwargs):
        return self.http.call(method, path, headers={**bearer(self.token), **kwargs.pop("headers", {})}, **kwargs)

    def json(self, method: str, path: str, expect: int = 200, **kwargs):
        return self.http.json(method, path, expect, headers={**bearer(self.token), **kwargs.pop("headers", {})},
                              **kwargs)


@pytest.fixture(scope="module")
def admin(http: Http) -> As:
    return As(http, login(http, ADMIN, ADMIN_PASSWORD))


def make_user(http: Http, admin: As, name: str) -> As:
    created = admin.json("POST", "/v1/users", 201, body={"username": name, "password": PASSWORD})
    assert created == {"name": name, "role": "user", "created_ms": created["created_ms"], "quotas": {}}
    return As(http, login(http, name, PASSWORD))


def produce(user: As, topic: str, value: str = "v") -> int:
    return user.call("POST", f"/v1/topics/{topic}/records", body={"records": [{"value": value}]}).status


def fetch(user: As, topic: str) -> int:
    return user.call("GET", f"/v1/topics/{topic}/partitions/0/records?offset=0").status


def test_public_routes_need_no_token_and_others_do(http):
    for path in ("/healthz", "/readyz", "/v1/openapi.json"):
        assert http.call("GET", path).status == 200, path
    for method, path in (("GET", "/v1/topics"), ("POST", "/v1/topics"), ("GET", "/v1/cluster"),
                         ("GET", "/v1/topics/x/partitions/0/records?offset=0"), ("GET", "/v1/users")):
        reply = http.call(method, path)
        assert reply.status == 401, (method, path)
        assert reply.headers["www-authenticate"].startswith("Bearer")
        assert reply.json()["code"] == "unauthenticated"


def test_readiness_is_a_bare_status_for_anyone_and_says_why_to_operators(http, admin):
    admin.json("POST", "/v1/topics", 201, body={"name": "ready-secret-name"})
    anonymous = http.call("GET", "/readyz")
    assert anonymous.status == 200 and anonymous.json() == {"ready": True}, "no storage, topics or sessions"
    user = make_user(http, admin, "ready-user")
    assert user.json("GET", "/readyz") == {"ready": True}
    for operator in (admin.token, METRICS_TOKEN):
        detailed = http.json("GET", "/readyz", headers=bearer(operator))
        assert detailed["ready"] is True and detailed["storage"]["offline_partitions"] == []


def test_metrics_need_the_scrape_credential_or_an_admin(http, admin):
    assert http.call("GET", "/metrics").status == 401
    assert http.call("GET", "/metrics", headers=bearer("a-wrong-scrape-credential")).status == 401
    scraped = http.call("GET", "/metrics", headers=bearer(METRICS_TOKEN))
    assert scraped.status == 200 and b"logbroker_http_requests_total" in scraped.data
    assert admin.call("GET", "/metrics").status == 200
    user = make_user(http, admin, "scraper.user")
    assert user.call("GET", "/metrics").status == 403


def test_login_refuses_wrong_passwords_unknown_users_and_bad_bodies(http):
    assert http.call("POST", "/v1/auth/token", body={"username": ADMIN, "password": "wrong-password"}).status == 401
    assert http.call("POST", "/v1/auth/token", body={"username": "nobody", "password": "whatever1"}).status == 401
    for body in ([], {"username": ADMIN}, {"username": 1, "password": "x"}, "text"):
        assert http.call("POST", "/v1/auth/token", body=body).status == 400, body
    assert http.call("POST", "/v1/auth/token", raw=b"{", content_type="application/json").status == 400


def test_only_admins_manage_users_and_input_is_checked(http, admin):
    alice = make_user(http, admin, "u.alice")
    assert alice.call("POST", "/v1/users", body={"username": "x1", "password": PASSWORD}).status == 403
    assert alice.call("GET", "/v1/users").status == 403
    for body in ({"username": "bad name", "password": PASSWORD}, {"username": "ok", "password": "short"},
                 {"username": "ok", "password": PASSWORD, "role": "root"}, {"username": "ok"},
                 {"username": "ok", "password": PASSWORD, "extra": 1},
                 {"username": "ok", "password": PASSWORD, "quotas": {"produce_bytes_per_s": -1}}):
        assert admin.call("POST", "/v1/users", body=body).status == 400, body
    assert admin.call("POST", "/v1/users", body={"username": "u.alice", "password": PASSWORD}).status == 409
    names = [u["name"] for u in admin.json("GET", "/v1/users")["users"]]
    assert "u.alice" in names and "ok" not in names
    listed = admin.json("GET", "/v1/users")["users"]
    assert all("password_hash" not in u and "password" not in u for u in listed)
    assert alice.json("GET", "/v1/users/u.alice")["role"] == "user"
    assert alice.call("GET", f"/v1/users/{ADMIN}").status == 403


def test_a_user_cannot_touch_another_users_topic_without_a_grant(http, admin):
    alice, bob = make_user(http, admin, "alice"), make_user(http, admin, "bob")
    created = alice.json("POST", "/v1/topics", 201, body={"name": "alice.orders", "partitions": 1})
    assert created["owner"] == "alice"
    assert produce(alice, "alice.orders") == 200 and fetch(alice, "alice.orders") == 200
    for status in (produce(bob, "alice.orders"), fetch(bob, "alice.orders"),
                   bob.call("GET", "/v1/topics/alice.orders").status,
                   bob.call("GET", "/v1/topics/alice.orders?offsets=false").status,
                   bob.call("GET", "/v1/topics/alice.orders?offsets=maybe").status,
                   bob.call("GET", "/v1/topics/alice.orders/partitions/0/offsets").status,
                   bob.call("DELETE", "/v1/topics/alice.orders").status,
                   bob.call("GET", "/v1/topics/alice.orders/acl").status,
                   bob.call("PUT", "/v1/topics/alice.orders/acl", body={"user": "bob",
                                                                         "permissions": ["read"]}).status):
        assert status == 403
    assert http.call("GET", "/v1/topics/alice.orders?offsets=false").status == 401  # no token
    assert "alice.orders" not in [t["name"] for t in bob.json("GET", "/v1/topics")["topics"]]
    assert "alice.orders" not in [t["name"] for t in bob.json("GET", "/v1/cluster")["topics"]]
    # an unknown topic is indistinguishable from a forbidden one for non-admins
    assert produce(bob, "no.such.topic") == 403
    assert admin.call("GET", "/v1/topics/no.such.topic").status == 404
    assert fetch(alice, "alice.orders") == 200 and len(alice.json(
        "GET", "/v1/topics/alice.orders/partitions/0/records?offset=0")["records"]) == 1


def test_grants_allow_exactly_what_they_name(http, admin):
    carol, dave = make_user(http, admin, "carol"), make_user(http, admin, "dave")
    carol.json("POST", "/v1/topics", 201, body={"name": "carol.events"})
    acl = carol.json("PUT", "/v1/topics/carol.events/acl", body={"user": "dave", "permissions": ["read"]})
    assert acl == {"topic": "carol.events", "owner": "carol", "acl": [{"user": "dave", "permissions": ["read"]}]}
    assert fetch(dave, "carol.events") == 200 and produce(dave, "carol.events") == 403
    assert dave.call("GET", "/v1/topics/carol.events").status == 200
    assert "carol.events" in [t["name"] for t in dave.json("GET", "/v1/topics")["topics"]]
    carol.json("PUT", "/v1/topics/carol.events/acl", body={"user": "dave", "permissions": ["write"]})
    assert produce(dave, "carol.events") == 200 and fetch(dave, "carol.events") == 403
    carol.json("PUT", "/v1/topics/carol.events/acl", body={"user": "dave", "permissions": ["read", "write"]})
    assert produce(dave, "carol.events") == 200 and fetch(dave, "carol.events") == 200
    # a grant never allows delete or ACL changes
    assert dave.call("DELETE", "/v1/topics/carol.events").status == 403
    assert dave.call("PUT", "/v1/topics/carol.events/acl", body={"user": "dave", "permissions": []}).status == 403
    for body in ({"user": "dave", "permissions": ["admin"]}, {"user": "dave"}, {"user": "dave", "permissions": "read"},
                 {"user": "no such", "permissions": []}, {"user": "dave", "permissions": [], "x": 1}, []):
        assert carol.call("PUT", "/v1/topics/carol.events/acl", body=body).status == 400, body
    assert carol.call("PUT", "/v1/topics/carol.events/acl", body={"user": "ghost", "permissions": ["read"]}).status \
        == 404
    carol.json("PUT", "/v1/topics/carol.events/acl", body={"user": "dave", "permissions": []})
    assert fetch(dave, "carol.events") == 403 and produce(dave, "carol.events") == 403
    assert carol.json("GET", "/v1/topics/carol.events/acl")["acl"] == []


def test_admins_may_do_anything(http, admin):
    erin = make_user(http, admin, "erin")
    erin.json("POST", "/v1/topics", 201, body={"name": "erin.logs"})
    assert produce(admin, "erin.logs") == 200 and fetch(admin, "erin.logs") == 200
    admin.json("PUT", "/v1/topics/erin.logs/acl", body={"user": ADMIN, "permissions": ["read"]})
    assert "erin.logs" in [t["name"] for t in admin.json("GET", "/v1/topics")["topics"]]
    assert admin.call("DELETE", "/v1/topics/erin.logs").status == 204


def test_user_topics_and_deleting_a_user_who_owns_topics(http, admin):
    frank, grace = make_user(http, admin, "frank"), make_user(http, admin, "grace")
    frank.json("POST", "/v1/topics", 201, body={"name": "frank.a"})
    frank.json("POST", "/v1/topics", 201, body={"name": "frank.q", "kind": "queue"})
    frank.json("PUT", "/v1/topics/frank.a/acl", body={"user": "grace", "permissions": ["read"]})
    owned = frank.json("GET", "/v1/users/frank/topics")
    assert owned == {"user": "frank", "topics": ["frank.a", "frank.q", "frank.q.dlq"], "grants": []}
    assert grace.json("GET", "/v1/users/grace/topics")["grants"] == [{"topic": "frank.a", "permissions": ["read"]}]
    assert grace.call("GET", "/v1/users/frank/topics").status == 403
    refused = admin.call("DELETE", "/v1/users/frank")
    assert refused.status == 409 and refused.json()["code"] == "user_owns_topics"
    assert refused.json()["topics"] == ["frank.a", "frank.q", "frank.q.dlq"]
    assert fetch(frank, "frank.a") == 200, "a refused delete changes nothing"
    assert admin.call("DELETE", "/v1/users/frank?reassign_to=nobody").status == 404
    assert grace.call("DELETE", "/v1/users/frank?reassign_to=grace").status == 403
    moved = admin.json("DELETE", "/v1/users/frank?reassign_to=grace")
    assert moved == {"deleted": "frank", "reassigned_topics": ["frank.a", "frank.q", "frank.q.dlq"]}
    assert admin.json("GET", "/v1/topics/frank.a")["owner"] == "grace"
    reply = frank.call("GET", "/v1/topics")
    assert reply.status == 401 and "no longer exists" in reply.json()["detail"]
    assert grace.json("GET", "/v1/users/grace/topics")["topics"] == ["frank.a", "frank.q", "frank.q.dlq"]
    assert produce(grace, "frank.a") == 200
    assert admin.call("DELETE", f"/v1/users/{ADMIN}").status == 403


def test_admin_can_reassign_a_topic(http, admin):
    heidi, ivan = make_user(http, admin, "heidi"), make_user(http, admin, "ivan")
    heidi.json("POST", "/v1/topics", 201, body={"name": "heidi.t"})
    assert heidi.call("PUT", "/v1/topics/heidi.t/owner", body={"owner": "ivan"}).status == 403
    assert admin.call("PUT", "/v1/topics/heidi.t/owner", body={"owner": "nobody"}).status == 404
    assert admin.json("PUT", "/v1/topics/heidi.t/owner", body={"owner": "ivan"})["owner"] == "ivan"
    assert produce(heidi, "heidi.t") == 403 and produce(ivan, "heidi.t") == 200


def test_password_change(http, admin):
    judy = make_user(http, admin, "judy")
    assert judy.call("PUT", "/v1/users/judy/password", body={"password": "short", "current_password": PASSWORD}
                     ).status == 400
    assert judy.call("PUT", f"/v1/users/{ADMIN}/password", body={"password": "new-password-1"}).status == 403
    assert judy.call("PUT", "/v1/users/judy/password",
                     body={"password": "new-password-1", "current_password": PASSWORD}).status == 204
    assert http.call("POST", "/v1/auth/token", body={"username": "judy", "password": PASSWORD}).status == 401
    login(http, "judy", "new-password-1")


def test_changing_ones_own_password_needs_the_current_one_and_a_token_alone_is_not_enough(http, admin):
    kate = make_user(http, admin, "kate")  # someone holding kate's token, not her password
    missing = kate.call("PUT", "/v1/users/kate/password", body={"password": "taken-over-1"})
    assert missing.status == 400 and "current_password" in missing.json()["detail"]
    wrong = kate.call("PUT", "/v1/users/kate/password", body={"password": "taken-over-1",
                                                             "current_password": "a-guess-at-it"})
    assert wrong.status == 403 and wrong.json()["code"] == "forbidden"
    assert kate.call("GET", "/v1/users/kate").status == 200, "a refused change revokes nothing"
    assert login(http, "kate", PASSWORD), "and changes nothing"
    assert kate.call("PUT", "/v1/users/kate/password", body={"password": "taken-over-1", "current_password": PASSWORD,
                                                            "role": "admin"}).status == 400
    own_admin = admin.call("PUT", f"/v1/users/{ADMIN}/password", body={"password": "another-admin-password"})
    assert own_admin.status == 400, "an admin changing their own password needs it too"
    reset = admin.call("PUT", "/v1/users/kate/password", body={"password": "reset-by-admin-1"})
    assert reset.status == 204, "an admin resetting another user's password needs no current one"
    assert login(http, "kate", "reset-by-admin-1")


def test_password_changes_of_one_user_are_budgeted(http, admin):
    from logbroker.auth.password_changes import BURST

    leo = make_user(http, admin, "leo")
    current = PASSWORD
    for i in range(BURST):
        new = f"leos-password-{i}"
        assert leo.call("PUT", "/v1/users/leo/password", body={"password": new, "current_password": current}
                        ).status == 204
        current = new
        leo = As(http, login(http, "leo", current))
    refused = leo.call("PUT", "/v1/users/leo/password", body={"password": "one-too-many", "current_password": current})
    assert refused.status == 429 and refused.json()["code"] == "too_many_requests"
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert login(http, "leo", current), "the refused change changed nothing"
    assert admin.call("PUT", "/v1/users/leo/password", body={"password": "reset-by-admin-2"}).status == 204, \
        "an admin's reset is not budgeted with the user's own changes"


# ---- token attacks ----------------------------------------------------------------------------

def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _claims(sub: str = ADMIN, **overrides) -> dict:
    now = int(time.time())
    return {"sub": sub, "roles": ["admin"], "iat": now, "exp": now + 600, "iss": "logbroker", **overrides}


def _status_with(http: Http, token: str) -> int:
    return http.call("GET", "/v1/topics", headers=bearer(token)).status


def test_token_attacks_are_refused(http, admin):
    issued = jwt.decode(admin.token, options={"verify_signature": False})
    identity = {"uid": issued["uid"], "ver": issued["ver"]}
    good = jwt.encode(_claims(**identity), JWT_SECRET, algorithm="HS256", headers={"kid": JWT_KID})
    assert _status_with(http, good) == 200, "the crafted token is valid when nothing is wrong with it"
    without_identity = jwt.encode(_claims(), JWT_SECRET, algorithm="HS256", headers={"kid": JWT_KID})
    other_user = jwt.encode(_claims(uid="0" * 32, ver=issued["ver"]), JWT_SECRET, algorithm="HS256",
                            headers={"kid": JWT_KID})
    other_version = jwt.encode(_claims(uid=issued["uid"], ver=issued["ver"] + 1), JWT_SECRET, algorithm="HS256",
                               headers={"kid": JWT_KID})
    expired = jwt.encode(_claims(iat=int(time.time()) - 7200, exp=int(time.time()) - 3600), JWT_SECRET,
                         algorithm="HS256", headers={"kid": JWT_KID})
    header, _payload, signature = admin.token.split(".")
    forged_payload = _b64(json.dumps(_claims(sub=ADMIN, exp=int(time.time()) + 10**6)).encode())
    tampered = ".".join((header, forged_payload, signature))
    none_alg = ".".join((_b64(json.dumps({"alg": "none", "typ": "JWT", "kid": JWT_KID}).encode()),
                         _b64(json.dumps(_claims()).encode()), ""))
    wrong_secret = jwt.encode(_claims(), "another-secret-that-is-long-enough-32b", algorithm="HS256",
                              headers={"kid": JWT_KID})
    unknown_kid = jwt.encode(_claims(), JWT_SECRET, algorithm="HS256", headers={"kid": "other"})
    no_kid = jwt.encode(_claims(), JWT_SECRET, algorithm="HS256")
    no_exp = jwt.encode({k: v for k, v in _claims().items() if k != "exp"}, JWT_SECRET, algorithm="HS256",
                        headers={"kid": JWT_KID})
    wrong_issuer = jwt.encode(_claims(iss="someone"), JWT_SECRET, algorithm="HS256", headers={"kid": JWT_KID})
    ghost = jwt.encode(_claims(sub="ghost"), JWT_SECRET, algorithm="HS256", headers={"kid": JWT_KID})
    for name, token in (("expired", expired), ("tampered", tampered), ("alg none", none_alg),
                        ("wrong secret", wrong_secret), ("unknown kid", unknown_kid), ("no kid", no_kid),
                        ("no exp", no_exp), ("wrong issuer", wrong_issuer), ("unknown user", ghost),
                        ("garbage", "not.a.token"), ("empty", ""), ("too long", "a" * 6000),
                        ("no user id or version", without_identity), ("another user's id", other_user),
                        ("another credential version", other_version)):
        reply = http.call("GET", "/v1/topics", headers=bearer(token))
        assert reply.status == 401, name
        assert reply.json()["code"] == "unauthenticated", name
    for header_value in ("Basic YWRtaW46cGFzcw==", admin.token, "Bearer"):
        assert http.call("GET", "/v1/topics", headers={"Authorization": header_value}).status == 401
    assert http.call("GET", "/v1/topics", headers=bearer("a" * 20000)).status == 400, "header over the line limit"
    assert _status_with(http, admin.token) == 200


# ---- bad input --------------------------------------------------------------------------------

JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(max_size=10), children, max_size=4), max_leaves=12)
BODIES = JSON_VALUES | st.fixed_dictionaries(
    {}, optional={"username": JSON_VALUES, "password": JSON_VALUES, "role": JSON_VALUES, "quotas": JSON_VALUES,
                  "user": JSON_VALUES, "permissions": JSON_VALUES, "owner": JSON_VALUES})


@settings(max_examples=60)
@given(body=BODIES, target=st.sampled_from([("POST", "/v1/auth/token"), ("POST", "/v1/users"),
                                            ("PUT", "/v1/topics/bad.input/acl"), ("PUT", "/v1/topics/bad.input/owner"),
                                            ("PUT", "/v1/users/bad.input.user/password"),
                                            ("PUT", "/v1/users/bad.input.user/quotas")]))
def test_arbitrary_bodies_get_a_clear_error_and_change_nothing(http, admin, body, target):
    if admin.call("GET", "/v1/users/bad.input.user").status == 404:
        admin.json("POST", "/v1/users", 201, body={"username": "bad.input.user", "password": PASSWORD})
        admin.call("POST", "/v1/topics", body={"name": "bad.input"})
    users_before = admin.json("GET", "/v1/users")["users"]
    acl_before = admin.json("GET", "/v1/topics/bad.input/acl")
    method, path = target
    reply = admin.call(method, path, body=body)
    assert reply.status < 500, (reply.status, reply.data[:300])
    if reply.status >= 400:
        problem = reply.json()
        assert problem["status"] == reply.status and problem["detail"] and problem["code"]
        assert admin.json("GET", "/v1/users")["users"] == users_before
        assert admin.json("GET", "/v1/topics/bad.input/acl") == acl_before


def test_openapi_marks_which_routes_need_a_token(http):
    document = http.json("GET", "/v1/openapi.json")
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert document["paths"]["/v1/auth/token"]["post"]["security"] == []
    assert document["paths"]["/v1/topics/{name}/records"]["post"]["security"] == [{"bearer": []}]
    assert document["paths"]["/v1/topics/{name}/records"]["post"]["x-logbroker-access"] == "write"
