"""The client side of a produce stream (``GET .../partitions/{p}/produce``, a WebSocket): prebuilt
batches sent one after another on one connection, each acknowledged in order by the node (the
node sends answers that are ready together as one message, a JSON array of them).

``send`` returns once the batch is written to the socket, with a future of its base offset (or of
the ``LogBrokerError`` the node answered for it: nothing of that batch was stored). At most
``in_flight_max`` batches wait for their answer; ``send`` waits for room beyond that. When the
stream ends (closed by either side, or the connection lost) every unanswered batch fails with a
transport error (status 0): it may or may not have been stored, as after a timed-out request.
"""

from __future__ import annotations

import asyncio
import collections
import json
from typing import Final

import aiohttp

from logbroker.client.errors import LogBrokerError, problem_error

IN_FLIGHT_MAX: Final = 64


class ProduceStream:
    """One open produce stream to one partition (make it with ``Client.produce_stream``)."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse, url: str, *,
                 in_flight_max: int = IN_FLIGHT_MAX) -> None:
        if in_flight_max < 1:
            raise ValueError("in_flight_max must be at least 1")
        self._socket = socket
        self._url = url
        self._room = asyncio.Semaphore(in_flight_max)
        self._waiting: collections.deque[asyncio.Future[int]] = collections.deque()
        self._ended: LogBrokerError | None = None
        self._reader = asyncio.create_task(self._read())

    async def send(self, batch: bytes) -> asyncio.Future[int]:
        """Send one prebuilt batch; a future of its base offset."""
        await self._room.acquire()
        if self._ended is not None:
            self._room.release()
            raise self._ended
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.append(answer)
        try:
            await self._socket.send_bytes(batch)
        except (ConnectionError, aiohttp.ClientError) as exc:
            self._end(LogBrokerError(0, "transport", f"produce stream to {self._url}: {exc!r}", retriable=True,
                                     extra={"url": self._url}))
        return answer

    async def close(self) -> None:
        """Close the stream: answers already on their way are read first."""
        await self._socket.close()
        await self._reader

    async def __aenter__(self) -> ProduceStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _read(self) -> None:
        try:
            async for message in self._socket:
                if message.type != aiohttp.WSMsgType.TEXT:
                    break
                answers = json.loads(message.data)
                for answer in answers if isinstance(answers, list) else [answers]:
                    if not self._waiting:
                        break
                    self._answer(self._waiting.popleft(), answer)
                    self._room.release()
                if not self._waiting and self._socket.closed:
                    break
        except (ValueError, ConnectionError, aiohttp.ClientError):
            pass
        reason = self._socket.close_code
        self._end(LogBrokerError(0, "transport", f"the produce stream to {self._url} ended (close code {reason}) "
                                 "before the node answered: the batch may or may not be stored", retriable=True,
                                 extra={"url": self._url, "close_code": reason}))

    @staticmethod
    def _answer(waiting: asyncio.Future[int], answer: dict[str, object]) -> None:
        if waiting.done():
            return
        error = answer.get("error")
        if isinstance(error, dict):
            status = error.get("status")
            waiting.set_exception(problem_error(status if isinstance(status, int) else 500,
                                                json.dumps(error).encode()))
            return
        offset = answer.get("offset")
        if isinstance(offset, int):
            waiting.set_result(offset)
        else:
            waiting.set_exception(LogBrokerError(0, "transport", f"the node answered without an offset: {answer!r}"))

    def _end(self, error: LogBrokerError) -> None:
        if self._ended is None:
            self._ended = error
        while self._waiting:
            waiting = self._waiting.popleft()
            if not waiting.done():
                waiting.set_exception(self._ended)
            self._room.release()
