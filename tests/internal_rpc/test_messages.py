"""The node service's typed messages: every request and answer of the table comes back equal through
the frame encoding; the table agrees with the types' declarations; replication codes are rows of
the one error table; and a malformed body (wrong type, missing or unknown field, unknown version,
not a map) is answered ``invalid_request`` before its handler runs, on a connection that serves on."""

from __future__ import annotations

import typing
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from internal_rpc import messages
from internal_rpc.client import RpcClient
from internal_rpc.errors import RpcCallError
from internal_rpc.frames import body_length, encode, unpack
from internal_rpc.messages import METHODS, REPLICATION_CODES, VERSION, Answer, Message, MessageError, decode
from internal_rpc.server import RpcServer
from logbroker.error_codes import ANSWERS

SERVICE = "S"
INT_MIN, INT_MAX = -(2**63), 2**64 - 1
SIZE_MAX = 3  # items per generated list, tuple or map: enough to vary, small enough to be quick


def strategy(info: mi.Type) -> st.SearchStrategy[Any]:
    """Values of one msgspec type, within its bounds (``msgspec.inspect`` describes it)."""
    if isinstance(info, mi.StructType):
        fields = {f.name: (st.just(VERSION) if f.name == "v" else strategy(f.type)) for f in info.fields}
        return st.fixed_dictionaries(fields).map(lambda kwargs: info.cls(**kwargs))
    if isinstance(info, mi.IntType):
        low = info.ge if info.ge is not None else INT_MIN
        return st.integers(low, info.le if info.le is not None else INT_MAX)
    if isinstance(info, mi.FloatType):
        return st.floats(allow_nan=False)
    if isinstance(info, mi.StrType):
        return st.text(max_size=8)
    if isinstance(info, mi.BytesType):
        return st.binary(max_size=64)
    if isinstance(info, mi.BoolType):
        return st.booleans()
    if isinstance(info, mi.NoneType):
        return st.none()
    if isinstance(info, mi.LiteralType):
        return st.sampled_from(info.values)
    if isinstance(info, mi.UnionType):
        return st.one_of(*(strategy(t) for t in info.types))
    if isinstance(info, mi.ListType):
        return st.lists(strategy(info.item_type), max_size=SIZE_MAX)
    if isinstance(info, mi.VarTupleType):
        return st.lists(strategy(info.item_type), max_size=SIZE_MAX).map(tuple)
    if isinstance(info, mi.TupleType):
        return st.tuples(*(strategy(t) for t in info.item_types))
    if isinstance(info, mi.DictType):
        return st.dictionaries(strategy(info.key_type), strategy(info.value_type), max_size=SIZE_MAX)
    raise AssertionError(f"no strategy for {info!r}")


MESSAGE_TYPES = [kind for method in METHODS.values() for kind in (method.request, method.answer)]


def messages_of_the_table() -> st.SearchStrategy[Message]:
    return st.one_of(*(strategy(mi.type_info(kind)) for kind in MESSAGE_TYPES))


@settings(max_examples=300, deadline=None)
@given(messages_of_the_table())
def test_every_message_round_trips_through_the_frame_encoding(message: Message) -> None:
    header, body = encode({"i": 7, "m": "S/M", "b": message})
    assert body_length(header) == len(body)
    frame = unpack(body)
    assert frame["i"] == 7 and frame["b"]["v"] == VERSION
    assert decode(type(message), frame["b"]) == message


def test_the_table_matches_each_requests_declared_answer() -> None:
    for name, method in METHODS.items():
        assert method.name == name
        (base,) = method.request.__orig_bases__  # type: ignore[attr-defined]
        assert typing.get_args(base) == (method.answer,), name
    declared = {value for value in vars(messages).values()
                if isinstance(value, type) and issubclass(value, Message) and value.__module__ == messages.__name__}
    assert declared - set(MESSAGE_TYPES) == {Message, Answer, messages.Request}


def test_replication_codes_are_a_closed_set_of_the_error_tables_codes() -> None:
    field = {f.name: f.type for f in msgspec.structs.fields(messages.ShipmentResult)}["error"]
    assert set(typing.get_args(messages.ReplicationCode)) == set(REPLICATION_CODES)
    assert set(typing.get_args(field)) == {messages.ReplicationCode, type(None)}
    assert set(REPLICATION_CODES) <= set(ANSWERS)
    stale = {"v": VERSION, "results": [{"error": "stale_leader_epoch", "epoch": 3}]}
    assert decode(messages.ReplicateAnswer, stale).results == [messages.ShipmentResult(error="stale_leader_epoch",
                                                                                       epoch=3)]
    with pytest.raises(MessageError, match="results"):  # a word of its own, not a code
        decode(messages.ReplicateAnswer, {"v": VERSION, "results": [{"error": "stale_epoch", "epoch": 3}]})


# ---- malformed bodies, answered on a live connection -------------------------------------------

VALID: dict[str, dict[str, Any]] = {
    "Ping": {},
    "Produce": {"topic": "t", "partition": 0, "batch": b"\x00" * 8, "acks": "1"},
    "Fetch": {"topic": "t", "partition": 0, "offset": 0, "max_bytes": 1024},
    "ListOffset": {"topic": "t", "partition": 0, "at": "latest"},
    "PartitionFigures": {"topic": "t", "partitions": [0, 1]},
    "Freeze": {"topic": "t", "partition": 0, "ttl_s": 1.5},
    "Thaw": {"topic": "t", "partition": 0},
    "Replicate": {"entries": [{"topic": "t", "topic_id": "i", "partition": 0, "epoch": 1, "hw": 0,
                               "leader_end": 0, "leader_start": 0}]},
    "StorageByPayer": {},
}
# A field of each request and a value of the wrong type for it (None where a request has none).
WRONG: dict[str, tuple[str, object] | None] = {
    "Ping": None, "Produce": ("batch", "text, not bytes"), "Fetch": ("max_bytes", 0),
    "ListOffset": ("partition", "0"), "PartitionFigures": ("partitions", [0, -1]), "Freeze": ("ttl_s", "1"),
    "Thaw": ("topic", 3), "Replicate": ("entries", [{"topic": "t"}]), "StorageByPayer": None,
}


def malformed(name: str) -> list[object]:
    valid = {"v": VERSION, **VALID[name]}
    bodies: list[object] = [{**valid, "v": VERSION + 1}, {k: v for k, v in valid.items() if k != "v"},
                            {**valid, "v": True}, {**valid, "unknown": 1}, [valid], "not a map"]
    if VALID[name]:
        first = next(iter(VALID[name]))
        bodies.append({k: v for k, v in valid.items() if k != first})
    wrong = WRONG[name]
    if wrong is not None:
        bodies.append({**valid, wrong[0]: wrong[1]})
    return bodies


def answer_of(name: str) -> Answer:
    """Some answer of ``name``'s type (the handlers' stand-in)."""
    samples: dict[str, Answer] = {
        "Ping": messages.PingAnswer(node_id=1), "Produce": messages.ProduceAnswer(base_offset=5),
        "Fetch": messages.FetchAnswer(data=b"batch", first_offset=0, next_offset=1, high_watermark=1),
        "ListOffset": messages.ListOffsetAnswer(partition=0, offset=None),
        "PartitionFigures": messages.PartitionFiguresAnswer(figures={0: {"size_bytes": 3, "dirty_ratio": 0.5}}),
        "Freeze": messages.FreezeAnswer(log_end=9), "Thaw": messages.ThawAnswer(),
        "Replicate": messages.ReplicateAnswer(results=[messages.ShipmentResult(error="stale_leader_epoch", epoch=4)]),
        "StorageByPayer": messages.StorageByPayerAnswer(payers={"ann": 10}),
    }
    return samples[name]


def handlers(seen: list[Message]) -> dict[str, Callable[[Any], Awaitable[Answer]]]:
    def handler(name: str) -> Callable[[Any], Awaitable[Answer]]:
        async def run(request: Message) -> Answer:
            assert isinstance(request, METHODS[name].request)
            seen.append(request)
            return answer_of(name)
        return run

    return {name: handler(name) for name in METHODS}


@pytest.mark.asyncio
async def test_a_malformed_body_is_invalid_request_before_its_handler_and_the_connection_serves_on() -> None:
    seen: list[Message] = []
    server = RpcServer("127.0.0.1", 0, {SERVICE: messages.bind(handlers(seen))}, tls=None, cluster_token=None)
    async with server, RpcClient(f"127.0.0.1:{server.port}", tls=None, cluster_token=None, deadline_s=5) as client:
        for name, method in METHODS.items():
            for body in malformed(name):
                with pytest.raises(RpcCallError) as refused:
                    await client.call(SERVICE, name, body)
                error = refused.value
                assert (error.code, error.answered, error.retriable) == ("invalid_request", True, False), (name, body)
                if isinstance(body, dict) and (body.get("v") is True or body.get("v", VERSION) != VERSION):
                    assert "version" in error.detail, error.detail
            assert seen == [], "a malformed body reached its handler"
            request = decode(method.request, {"v": VERSION, **VALID[name]})
            answer = await client.call(SERVICE, name, request)  # the same connection, typed both ways
            assert decode(method.answer, answer) == answer_of(name)
            assert seen == [request]
            seen.clear()
