"""A produce stream's answer queue alone: answers leave in the order their messages came, those
finished together at once, never more than the limit waiting, and nothing lost at the close."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from http_api.produce_answers import AnswerQueue


def _future(loop: asyncio.AbstractEventLoop) -> asyncio.Future[bytes]:
    return loop.create_future()


def test_finished_answers_at_the_head_leave_together_and_a_late_one_holds_the_rest_back():
    async def scenario() -> list[list[bytes] | None]:
        loop = asyncio.get_running_loop()
        queue = AnswerQueue(8)
        first, second, third = _future(loop), _future(loop), _future(loop)
        for answer in (first, second, third):
            await queue.put(answer)
        second.set_result(b"2")
        third.set_result(b"3")
        waiting = asyncio.ensure_future(queue.ready())
        await asyncio.sleep(0)
        assert not waiting.done(), "the first answer is not ready, so none leaves"
        first.set_result(b"1")
        taken = [await waiting]
        queue.close()
        taken.append(await queue.ready())
        return taken

    assert asyncio.run(scenario()) == [[b"1", b"2", b"3"], None]


def test_put_waits_for_room_and_close_ends_only_after_every_answer_is_taken():
    async def scenario() -> tuple[bool, list[bytes]]:
        loop = asyncio.get_running_loop()
        queue = AnswerQueue(2)
        held = [_future(loop), _future(loop)]
        for answer in held:
            await queue.put(answer)
        third = asyncio.ensure_future(queue.put(_future(loop)))
        await asyncio.sleep(0)
        blocked = not third.done()
        held[0].set_result(b"a")
        assert await queue.ready() == [b"a"]
        await asyncio.wait_for(third, 1)
        queue.close()
        held[1].set_result(b"b")
        rest = await queue.ready()
        assert rest == [b"b"]
        return blocked, rest

    blocked, _ = asyncio.run(scenario())
    assert blocked


def test_drained_returns_once_the_writer_has_taken_everything_and_asks_again():
    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        queue = AnswerQueue(4)
        events: list[str] = []

        async def writer() -> None:
            while (ready := await queue.ready()) is not None:
                await asyncio.sleep(0.01)
                events.append("sent " + b",".join(ready).decode())

        task = asyncio.ensure_future(writer())
        done = _future(loop)
        done.set_result(b"x")
        await queue.put(done)
        await queue.drained()
        events.append("drained")
        queue.close()
        await task
        return events

    assert asyncio.run(scenario()) == ["sent x", "drained"]


def test_idle_only_while_nothing_waits_and_the_writer_asks_for_more():
    async def scenario() -> list[bool]:
        loop = asyncio.get_running_loop()
        queue = AnswerQueue(4)
        seen: list[bool] = [queue.idle()]  # the writer has not asked yet
        sending = asyncio.Event()
        release = asyncio.Event()

        async def writer() -> None:
            while await queue.ready() is not None:
                sending.set()
                await release.wait()  # a slow send

        task = asyncio.ensure_future(writer())
        await asyncio.sleep(0)
        seen.append(queue.idle())  # asked, nothing waits
        pending = _future(loop)
        await queue.put(pending)
        seen.append(queue.idle())  # an answer waits
        pending.set_result(b"a")
        await sending.wait()
        seen.append(queue.idle())  # taken, but still being sent
        release.set()
        await asyncio.sleep(0)
        seen.append(queue.idle())  # sent, asking again
        queue.close()
        await task
        return seen

    assert asyncio.run(scenario()) == [False, True, False, False, True]


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError):
        AnswerQueue(0)


@settings(max_examples=60, deadline=None)
@given(order=st.permutations(list(range(12))), limit=st.integers(min_value=1, max_value=12))
def test_any_finishing_order_gives_every_answer_once_in_message_order(order: list[int], limit: int):
    async def scenario() -> list[bytes]:
        loop = asyncio.get_running_loop()
        queue = AnswerQueue(limit)
        answers = [_future(loop) for _ in order]
        taken: list[bytes] = []

        async def writer() -> None:
            while (ready := await queue.ready()) is not None:
                taken.extend(ready)

        async def finisher() -> None:
            for index in order:
                await asyncio.sleep(0)
                answers[index].set_result(str(index).encode())

        task = asyncio.ensure_future(writer())
        finishing = asyncio.ensure_future(finisher())
        for answer in answers:
            await queue.put(answer)
        await finishing
        queue.close()
        await asyncio.wait_for(task, 5)
        return taken

    assert asyncio.run(scenario()) == [str(i).encode() for i in range(12)]
