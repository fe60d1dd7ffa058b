"""Data-driven traces of ``logbroker.partition_machine`` in the style of etcd raft's testdata: each
file under ``partition_traces/`` is a list of commands, each followed by ``----`` and the effects
and state it must produce (a blank line ends an entry; ``#`` starts a comment).

Commands (``key=value`` arguments; lists are comma-separated node ids, ``-`` for none):
``init me= [log_end=] [topic=] [partition=]``, ``time now=`` (the clock every later step reads),
``leader epoch= replicas= isr= min_insync= lease=``, ``follower epoch=``, ``lease until=``,
``reassign replicas= min_insync=``, ``append end= acks=``, ``fetched node= end=``, ``lagged node=``,
``isr-committed isr=``, ``isr-failed``, ``shipment epoch= end= hw=``, ``freeze until=``, ``thaw``,
``hand-over``, ``hand-over-ended``, ``drain``, and ``check acks=`` (the write gate's answer).

``LOGBROKER_REWRITE_TRACES=1`` rewrites the expected output from what the machine does (read the
diff before keeping it).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable

import pytest

from logbroker import partition_machine as pm

TRACES = pathlib.Path(__file__).parent / "partition_traces"
REWRITE = os.environ.get("LOGBROKER_REWRITE_TRACES") == "1"


def _nodes(text: str) -> tuple[int, ...]:
    return () if text == "-" else tuple(int(n) for n in text.split(","))


def _list(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values)) or "-"


def render_state(state: pm.PartitionState) -> str:
    role = f"{'leader' if state.leads else 'follower'}@{state.epoch}"
    isr = _list(state.isr.committed)
    if state.isr.expanding:
        isr += f" +{_list(state.isr.expanding)}"
    if state.isr.shrinking:
        isr += f" -{_list(state.isr.shrinking)}"
    if state.isr.eligible:
        isr += f" elr={_list(state.isr.eligible)}"
    phase = state.phase.value + (f"<{state.frozen_until_ms}" if state.phase is pm.Phase.FROZEN else "")
    followers = ",".join(f"{n}:{end}" for n, end in state.followers) or "-"
    return (f"state: {role} isr={isr} phase={phase} hw={state.high_watermark} end={state.log_end} "
            f"followers={followers} waiting={_list(state.waiting)}")


def render_effect(effect: pm.Effect) -> str:
    match effect:
        case pm.Ship(followers=followers):
            return f"ship {_list(followers)}"
        case pm.WriteIsr(epoch=epoch, isr=isr, elr=elr):
            return f"write-isr epoch={epoch} isr={_list(isr)}" + (f" elr={_list(elr)}" if elr else "")
        case pm.Expose(high_watermark=hw):
            return f"expose {hw}"
        case pm.Acknowledge(up_to=up_to):
            return f"acknowledge up_to={up_to}"
        case pm.FailWaiters(up_to=up_to, code=code):
            return f"fail-waiters up_to={'all' if up_to == pm.EVERY_WAITER else up_to} {code}"
        case pm.AppendCopied(end=end):
            return f"append-copied end={end}"
        case pm.RefuseShipment(known_epoch=epoch):
            return f"refuse-shipment known_epoch={epoch}"
    raise AssertionError(effect)


EVENTS: dict[str, Callable[[dict[str, str]], pm.Event]] = {
    "leader": lambda a: pm.BecameLeader(int(a["epoch"]), _nodes(a["replicas"]), _nodes(a["isr"]),
                                        int(a["min_insync"]), int(a["lease"]), _nodes(a.get("elr", "-"))),
    "follower": lambda a: pm.BecameFollower(int(a["epoch"])),
    "lease": lambda a: pm.LeaseRenewed(int(a["until"])),
    "reassign": lambda a: pm.Reassigned(_nodes(a["replicas"]), int(a["min_insync"])),
    "append": lambda a: pm.Appended(int(a["end"]), a["acks"]),  # type: ignore[arg-type]
    "fetched": lambda a: pm.FollowerFetched(int(a["node"]), int(a["end"])),
    "lagged": lambda a: pm.FollowerLagged(int(a["node"])),
    "isr-committed": lambda a: pm.IsrCommitted(_nodes(a["isr"]), _nodes(a.get("elr", "-"))),
    "isr-failed": lambda a: pm.IsrFailed(),
    "shipment": lambda a: pm.Shipment(int(a["epoch"]), int(a["end"]), int(a["hw"])),
    "freeze": lambda a: pm.Freeze(int(a["until"])),
    "thaw": lambda a: pm.Thaw(),
    "hand-over": lambda a: pm.HandOver(),
    "hand-over-ended": lambda a: pm.HandOverEnded(),
    "drain": lambda a: pm.Drain(),
}


class Trace:
    """Runs one file's commands against one partition."""

    def __init__(self) -> None:
        self.state: pm.PartitionState | None = None
        self.now_ms = 0

    def run(self, command: str) -> str:
        name, *words = command.split()
        args = dict(word.split("=", 1) for word in words)
        if name == "init":
            self.state = pm.PartitionState(args.get("topic", "t"), int(args.get("partition", "0")), int(args["me"]),
                                           log_end=int(args.get("log_end", "0")))
            return render_state(self.state)
        if name == "time":
            self.now_ms = int(args["now"])
            return f"now={self.now_ms}"
        assert self.state is not None, "a trace starts with init"
        if name == "check":
            error = pm.check_append(self.state, args["acks"], self.now_ms)
            return "ok" if error is None else f"refused {error.code}: {error}"
        self.state, effects = pm.step(self.state, EVENTS[name](args), self.now_ms)
        return "\n".join([*(render_effect(e) for e in effects), render_state(self.state)])


def parse(text: str) -> list[tuple[int, str, str]]:
    """``(line, command, expected output)`` of each entry."""
    entries = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line or line.startswith("#"):
            i += 1
            continue
        start = i + 1
        assert i + 1 < len(lines) and lines[i + 1].strip() == "----", f"line {start}: a command needs ---- after it"
        i += 2
        out = []
        while i < len(lines) and lines[i].strip():
            out.append(lines[i].rstrip())
            i += 1
        entries.append((start, line, "\n".join(out)))
    return entries


def rewrite(text: str, actual: list[str]) -> str:
    """``text`` with each entry's expected output replaced by ``actual`` (comments kept)."""
    lines, out, i, n = text.splitlines(), [], 0, 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        if not line.strip() or line.strip().startswith("#"):
            i += 1
            continue
        out.append("----")
        out.extend(actual[n].splitlines())
        n += 1
        i += 2
        while i < len(lines) and lines[i].strip():
            i += 1
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("path", sorted(TRACES.glob("*.txt")), ids=lambda p: p.stem)
def test_trace(path: pathlib.Path) -> None:
    text = path.read_text()
    trace = Trace()
    entries = parse(text)
    actual = [trace.run(command) for _, command, _ in entries]
    if REWRITE:
        path.write_text(rewrite(text, actual))
        return
    for (line, command, expected), got in zip(entries, actual, strict=True):
        assert got == expected, f"{path.name}:{line}: {command}\nexpected:\n{expected}\ngot:\n{got}"


def test_the_traces_exist_and_each_checks_something() -> None:
    paths = sorted(TRACES.glob("*.txt"))
    assert len(paths) >= 4
    for path in paths:
        assert len(parse(path.read_text())) >= 5, path.name


def test_a_wrong_expectation_fails(tmp_path: pathlib.Path) -> None:
    entries = parse("init me=1\n----\nstate: nonsense\n")
    assert Trace().run(entries[0][1]) != entries[0][2]
