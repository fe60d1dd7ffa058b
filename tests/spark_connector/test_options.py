"""Option parsing (pure): what is accepted, and a clear error for everything else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_connector.errors import OptionError
from spark_connector.options import LATEST, Location, parse_read_options, parse_write_options


def test_defaults_follow_sparks_kafka_source():
    batch = parse_read_options({"topic": "t", "path": "/a, /b"}, "batch")
    assert batch.location == Location(data_dirs=("/a", "/b"))
    assert (batch.starting, batch.ending, batch.fail_on_data_loss) == ("earliest", "latest", True)
    stream = parse_read_options({"TOPIC": "t", "url": "http://h:1/", "token": "abc"}, "stream")
    assert stream.starting == "latest" and stream.location.url == "http://h:1" and stream.location.token == "abc"
    assert parse_read_options({"topic": "t", "url": "http://h:1", "startingOffsets": '{"t": {"0": 5, "2": -1}}'},
                              "batch").starting == {0: 5, 2: LATEST}
    assert parse_read_options({"topic": "t", "url": "http://h:1", "checkpointLocation": "/x"}, "stream").topic == "t"
    write = parse_write_options({"topic": "t", "url": "http://h:1", "acks": "1", "batchBytes": "4096"})
    assert (write.acks, write.batch_bytes, write.location.ca_file) == ("1", 4096, None)
    secure = parse_read_options({"topic": "t", "url": "https://h:1", "caFile": "/certs/ca.pem"}, "batch")
    assert secure.location.ca_file == "/certs/ca.pem"
    assert parse_write_options({"topic": "t", "url": "https://h:1", "cafile": "/c"}).location.ca_file == "/c"
    keyed = parse_read_options({"topic": "t", "path": "/d", "encryptionKeysFile": "/keys"}, "batch")
    assert keyed.location.keys_file == "/keys"


BAD = [
    ({"url": "http://h:1"}, "batch", "the option topic is required"),
    ({"topic": "a b", "url": "http://h:1"}, "batch", "is not a valid topic name"),
    ({"topic": "t"}, "batch", "say where the records are"),
    ({"topic": "t", "url": "ftp://h"}, "batch", "url must start with http:// or https://"),
    ({"topic": "t", "path": "/d", "token": "x"}, "batch", "token, username, password and caFile are for url (HTTP)"),
    ({"topic": "t", "path": "/d", "caFile": "/ca.pem"}, "batch", "caFile are for url (HTTP) access"),
    ({"topic": "t", "url": "http://h:1", "caFile": "/ca.pem"}, "batch", "caFile is the CA certificate of an https://"),
    ({"topic": "t", "url": "http://h:1", "username": "u"}, "batch", "username and password go together"),
    ({"topic": "t", "url": "http://h:1", "token": "x", "username": "u", "password": "p"}, "batch",
     "either token or username and password"),
    ({"topic": "t", "path": " , "}, "batch", "names no directory"),
    ({"topic": "t", "url": "http://h:1", "encryptionKeysFile": "/k"}, "batch", "encryptionKeysFile is for a direct"),
    ({"topic": "t", "path": "/d", "startingOffsets": '{"t": {"x": 1}}'}, "batch", "must be a partition number"),
    ({"topic": "t", "path": "/d", "startingOffsets": '{"t": {"0": -3}}'}, "batch", "offset -3 for partition 0"),
    ({"topic": "t", "path": "/d", "endingOffsets": '{"t": {"0": -2}}'}, "batch", "offset -2 for partition 0"),
    ({"topic": "t", "path": "/d", "startingOffsets": "earliest", "startingTimestamp": "5"}, "batch", "not both"),
    ({"topic": "t", "path": "/d", "startingTimestamp": "soon"}, "batch", "startingTimestamp must be an integer"),
    ({"topic": "t", "path": "/d", "maxOffsetsPerTrigger": "0"}, "stream", "maxOffsetsPerTrigger must be at least 1"),
    ({"topic": "t", "path": "/d", "minPartitions": "4"}, "stream", "minPartitions is for batch reads only"),
    ({"topic": "t", "path": "/d", "timeoutSeconds": "-1"}, "batch", "timeoutSeconds must be above 0"),
    ({"topic": "t", "path": "/d", "kafka.bootstrap.servers": "x"}, "batch", "unknown option(s) for reading"),
    ({"topic": "t", "url": "http://h:1", "commitToGroup": "g"}, "batch", "commitToGroup is for streaming reads only"),
    ({"topic": "t", "path": "/d", "commitToGroup": "g"}, "stream", "commitToGroup commits through a node"),
    ({"topic": "t", "url": "http://h:1", "commitToGroup": "a/b"}, "stream", "commitToGroup must be a group name"),
]


@pytest.mark.parametrize(("options", "mode", "message"), BAD)
def test_bad_read_options(options, mode, message):
    with pytest.raises(OptionError, match=_re(message)):
        parse_read_options(options, mode)


@pytest.mark.parametrize(("options", "message"), [
    ({"topic": "t"}, "say where the records are: url"),
    ({"topic": "t", "url": "http://h:1", "acks": "-1"}, "acks must be one of 0, 1, all"),
    ({"topic": "t", "url": "http://h:1", "batchBytes": "10"}, "batchBytes must be between 1024"),
    ({"topic": "t", "url": "http://h:1", "startingOffsets": "earliest"}, "unknown option(s) for writing"),
])
def test_bad_write_options(options, message):
    with pytest.raises(OptionError, match=_re(message)):
        parse_write_options(options)


@given(st.text(max_size=40))
def test_any_offsets_text_parses_or_fails_with_option_error(text):
    try:
        parsed = parse_read_options({"topic": "t", "path": "/d", "startingOffsets": text}, "batch")
    except OptionError as exc:
        assert "startingOffsets" in str(exc)
    else:
        assert parsed.starting in ("earliest", "latest") or isinstance(parsed.starting, dict)


def _re(text: str) -> str:
    import re

    return re.escape(text)
