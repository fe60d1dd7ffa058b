"""Queue calls through the front door itself (decision 0402): ``BrokerApi`` called directly with a
``CallContext``, on a node in this process with authentication on. A caller without the grant is
refused by the API before any body is read; a send and a receive are each charged once, with the
bytes received or answered and the messages they moved; a settle and a state read are not charged.
A protocol that bypassed the front door would skip these checks, so these tests say it may not."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from logbroker.api import BrokerApi
from logbroker.api_types import Answered, CallContext
from logbroker.auth.permissions import Principal
from logbroker.auth.quotas import QuotaLimits
from logbroker.config import NodeConfig
from logbroker.errors import ForbiddenError, InvalidRequestError, TooManyRequestsError
from logbroker.node import Node
from logbroker.queues.requests import ReceiveRequest
from logbroker.records import IncomingRecord
from segments.batch import ProducerRecord

OWNER, STRANGER = CallContext(Principal("ann", "user"), QuotaLimits()), CallContext(Principal("bob", "user"),
                                                                                   QuotaLimits())


class Messages:
    """A ``QueuePayload`` of JSON-sized records that says whether it was read."""

    def __init__(self, *values: bytes) -> None:
        self.values = values
        self.size_bytes = len(json.dumps([v.decode() for v in values]))
        self.received = False

    def received_bytes(self) -> int:
        return self.size_bytes if self.received else 0

    async def receive(self) -> None:
        self.received = True

    async def decode(self) -> list[IncomingRecord]:
        return [IncomingRecord(ProducerRecord(value), None) for value in self.values]


class Charges:
    """Every ``Meter.charge`` of the node, as (user, kind, bytes, records, requests)."""

    def __init__(self, node: Node) -> None:
        self.calls: list[tuple[str, str, int, int, int]] = []
        charge = node.auth.meter.charge

        def recorded(user: str, kind: Any, limits: Any, size_bytes: int, **at: Any) -> None:
            self.calls.append((user, kind, size_bytes, at["records"], at["requests"]))
            charge(user, kind, limits, size_bytes, **at)
        node.auth.meter.charge = recorded  # type: ignore[method-assign]


@pytest_asyncio.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    started = Node(NodeConfig(data_dir=str(tmp_path / "data"), auth="on", rpc_port=0,
                               admin_password="an admin password"))
    await started.start()
    try:
        await started.topics.create_topic({"name": "jobs", "kind": "queue"}, owner="ann")
        yield started
    finally:
        await started.stop()


async def never_read() -> object:
    raise AssertionError("the body of a refused call is not read")


async def rendered(asked: ReceiveRequest, messages: list[dict[str, Any]]) -> Answered[list[dict[str, Any]]]:
    return Answered(messages, 100 * len(messages), len(messages))


@pytest.mark.asyncio
async def test_a_caller_without_the_grant_is_refused_by_the_api_before_any_body_is_read(node: Node) -> None:
    api, charges = BrokerApi(node), Charges(node)
    body = Messages(b"job")
    with pytest.raises(ForbiddenError):
        await api.queue_send(STRANGER, "jobs", body, "1")
    assert not body.received, "refused before the body was read"
    with pytest.raises(ForbiddenError):
        await api.queue_receive(STRANGER, "jobs", never_read, binary=False, answer=rendered)
    with pytest.raises(ForbiddenError):
        await api.queue_ack(STRANGER, "jobs", never_read)
    with pytest.raises(ForbiddenError):
        await api.queue_nack(STRANGER, "jobs", never_read)
    with pytest.raises(ForbiddenError):
        await api.queue_state(STRANGER, "jobs")
    assert charges.calls == [], "a call refused before its quota check is not charged"
    assert node.queues.describe("jobs")["partitions"][0]["in_flight"] == 0


@pytest.mark.asyncio
async def test_a_grant_of_read_lets_a_caller_receive_and_settle_but_not_send(node: Node) -> None:
    api = BrokerApi(node)
    await node.auth.create_user({"username": "bob", "password": "bob's long password"})
    await node.coordinator.set_acl("jobs", "bob", frozenset({"read"}))
    await api.queue_send(OWNER, "jobs", Messages(b"one"), "1")
    with pytest.raises(ForbiddenError):
        await api.queue_send(STRANGER, "jobs", Messages(b"two"), "1")

    async def asked() -> object:
        return {"max_messages": 5}
    [message] = await api.queue_receive(STRANGER, "jobs", asked, binary=True, answer=rendered)
    assert message["value"] == b"one"

    async def receipts() -> object:
        return {"receipts": [message["receipt"]]}
    assert (await api.queue_ack(STRANGER, "jobs", receipts))["acked"] == 1
    assert (await api.queue_state(OWNER, "jobs"))["partitions"][0]["in_flight"] == 0


@pytest.mark.asyncio
async def test_a_send_and_a_receive_are_each_charged_once(node: Node) -> None:
    api, charges = BrokerApi(node), Charges(node)
    body = Messages(b"a", b"b")
    sent = await api.queue_send(OWNER, "jobs", body, "1")
    assert sent.records == 2
    assert charges.calls == [("ann", "produce", body.size_bytes, 2, 1)]

    async def asked() -> object:
        return {"max_messages": 10}
    messages = await api.queue_receive(OWNER, "jobs", asked, binary=False, answer=rendered)
    assert len(messages) == 2
    assert charges.calls[1:] == [("ann", "fetch", 200, 2, 1)], "charged the answer's size, once"

    async def receipts() -> object:
        return {"receipts": [m["receipt"] for m in messages]}
    await api.queue_nack(OWNER, "jobs", receipts)
    await api.queue_state(OWNER, "jobs")
    assert len(charges.calls) == 2, "settles and state reads are not charged"


@pytest.mark.asyncio
async def test_a_refused_send_is_charged_what_was_received_and_stores_nothing(node: Node) -> None:
    api, charges = BrokerApi(node), Charges(node)
    body = Messages(b"x")
    with pytest.raises(InvalidRequestError):  # the node's acks check
        await api.queue_send(OWNER, "jobs", body, "two")
    assert charges.calls == [("ann", "produce", body.size_bytes, 0, 1)]


@pytest.mark.asyncio
async def test_a_caller_in_quota_debt_is_refused_before_the_body_is_read(node: Node) -> None:
    api = BrokerApi(node)
    limited = CallContext(Principal("ann", "user"), QuotaLimits(produce_bytes_per_s=1, fetch_bytes_per_s=1))
    await api.queue_send(limited, "jobs", Messages(b"x" * 10_000), "1")  # the debt
    body = Messages(b"y")
    with pytest.raises(TooManyRequestsError):
        await api.queue_send(limited, "jobs", body, "1")
    assert not body.received
    await api.queue_receive(limited, "jobs", lambda: _empty(), binary=False,
                            answer=lambda asked, got: _sized(got, 10_000))
    with pytest.raises(TooManyRequestsError):
        await api.queue_receive(limited, "jobs", never_read, binary=False, answer=rendered)


async def _empty() -> object:
    return {}


async def _sized(messages: list[dict[str, Any]], size_bytes: int) -> Answered[list[dict[str, Any]]]:
    return Answered(messages, size_bytes, len(messages))
