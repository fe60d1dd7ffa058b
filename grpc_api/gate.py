"""The door of every public gRPC call: a share of the node's call slots, the caller authenticated from
the call's metadata, then its request message within ``grpc_request_timeout_ms``.

The wire is the same for a unary request and a request stream, so each method is registered with a
request-stream handler: the gate runs as soon as a call's headers arrive, before any message, where
grpcio's unary handlers would wait for the message without a bound while the call holds a slot.
In order:

1. ``CallBudget.admit`` on the peer's connection and address (RESOURCE_EXHAUSTED at once past a
   share);
2. the ``authorization`` metadata checked (UNAUTHENTICATED at once without a valid token), which
   proves the call against the caller's user share;
3. the first request message read with a deadline (DEADLINE_EXCEEDED when it does not come,
   INVALID_ARGUMENT when it is not the method's message; with auth off its arrival proves the
   call); the handler then runs on that message, as a unary one would.

The ticket is released when the call ends, however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError

from grpc_api.call_budget import CallBudget, CallLimits, Ticket, peer_parts
from grpc_api.errors import abort_for
from logbroker.auth.permissions import Principal
from logbroker.auth.quotas import QuotaLimits
from logbroker.auth.service import AuthService
from logbroker.config import NodeConfig
from logbroker.errors import ANY_ERROR, InvalidRequestError, RequestTimeoutError, TooManyRequestsError

RETRY_AFTER_S: Final = 1.0  # a call refused for want of a share: slots free up as calls end

Caller = tuple[Principal, QuotaLimits]
UnaryBehavior = Callable[[Any, Any, Caller], Awaitable[Any]]
StreamBehavior = Callable[[Any, Any, Caller], AsyncGenerator[Any, None]]


def limits_of(config: NodeConfig) -> CallLimits:
    return CallLimits(calls_max=config.grpc_calls_max, per_connection_max=config.grpc_calls_per_connection_max,
                      per_address_max=config.grpc_calls_per_address_max,
                      per_user_max=config.grpc_calls_per_user_max, reserved=config.grpc_calls_reserved)


class CallGate:
    def __init__(self, config: NodeConfig, auth: AuthService) -> None:
        self.budget = CallBudget(limits_of(config))
        self.auth = auth
        self.request_timeout_s = config.grpc_request_timeout_ms / 1000

    def unary(self, behavior: UnaryBehavior) -> Callable[[Any, Any], Awaitable[Any]]:
        """A request-stream handler for a unary-request, unary-response ``behavior(request, context, caller)``."""
        async def handle(_requests: Any, context: Any) -> Any:
            ticket = await self._admit(context)
            try:
                caller = await self._authenticate(context, ticket)
                request = await self._request(context, ticket)
                return await behavior(request, context, caller)
            finally:
                self.budget.release(ticket)
        return handle

    def streaming(self, behavior: StreamBehavior) -> Callable[[Any, Any], AsyncIterator[Any]]:
        """A request-stream handler for a unary-request, response-stream ``behavior``."""
        async def handle(_requests: Any, context: Any) -> AsyncIterator[Any]:
            ticket = await self._admit(context)
            try:
                caller = await self._authenticate(context, ticket)
                request = await self._request(context, ticket)
                async for response in _relayed(behavior(request, context, caller)):
                    yield response
            finally:
                self.budget.release(ticket)
        return handle

    def public_stream(self, behavior: Callable[[AsyncIterator[Any], Any], AsyncGenerator[Any, None]]
                      ) -> Callable[[Any, Any], AsyncIterator[Any]]:
        """A request-stream, response-stream handler open to anyone (server reflection): it stays
        unproven, so such calls take only the slots not kept for authenticated callers, and every
        request message must arrive within the same bound as a first one."""
        async def handle(_requests: Any, context: Any) -> AsyncIterator[Any]:
            ticket = await self._admit(context)

            async def requests() -> AsyncIterator[Any]:
                while (message := await self._read(context)) is not grpc.aio.EOF:
                    yield message
            try:
                async for response in _relayed(behavior(requests(), context)):
                    yield response
            finally:
                self.budget.release(ticket)
        return handle

    async def _admit(self, context: Any) -> Ticket:
        ticket = self.budget.admit(*peer_parts(context.peer() or ""))
        if isinstance(ticket, str):
            await abort_for(context, TooManyRequestsError(ticket + "; retry later", retry_after_s=RETRY_AFTER_S))
        return ticket

    async def _authenticate(self, context: Any, ticket: Ticket) -> Caller:
        try:
            caller = await self.auth.authenticate(authorization_of(context))
        except ANY_ERROR as exc:
            await abort_for(context, exc)
        if self.auth.enabled:
            await self._prove(context, ticket, caller[0].name)
        return caller

    async def _request(self, context: Any, ticket: Ticket) -> Any:
        request = await self._read(context)
        if request is grpc.aio.EOF:
            await abort_for(context, InvalidRequestError("the call ended before its request message"))
        if not ticket.proven:
            await self._prove(context, ticket, None)
        return request

    async def _read(self, context: Any) -> Any:
        try:
            async with asyncio.timeout(self.request_timeout_s):
                return await context.read()
        except TimeoutError:
            await abort_for(context, RequestTimeoutError(
                f"no request message within {self.request_timeout_s:g} s of the call's start (or the last one)"))
        except DecodeError as exc:
            await abort_for(context, InvalidRequestError(f"the request message is not valid protobuf: {exc}"))

    async def _prove(self, context: Any, ticket: Ticket, user: str | None) -> None:
        refused = self.budget.prove(ticket, user)
        if refused is not None:
            await abort_for(context, TooManyRequestsError(refused + "; retry later", retry_after_s=RETRY_AFTER_S))


def authorization_of(context: Any) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str):
            return value
    return None


async def _relayed(responses: AsyncGenerator[Any, None]) -> AsyncIterator[Any]:
    """The responses of a handler's generator, which is closed however the call ends."""
    async with contextlib.aclosing(responses):
        async for response in responses:
            yield response
