"""The code blocks of a Markdown file, as the README test runs them: pure parsing, no I/O.

A block is a fenced block whose info string is ``sh``, ``bash``, ``shell`` or ``python``; every
other fenced block must name its language too (``toml``, ``text``, ...), so that no command hides
in an untagged block. The line before a block (blank lines between allowed) may hold one marker,
visible in the source and invisible once rendered:

- ``<!-- readme: skip (why) -->``: not run; the reason is required.
- ``<!-- readme: background until "TEXT" -->``: started as in a terminal of its own (a server:
  ``make run``, ``make cluster``), ready once a line of its output contains TEXT, stopped at the end.
- ``<!-- readme: interrupt after N s (why) -->``: its last command runs until stopped (``--follow``,
  a stream); after N seconds it gets SIGINT, as a person's Ctrl-C, and passes if nothing failed
  before that.

A ``## `` heading starts a section: a fresh shell environment and a fresh Python namespace, as a
new terminal (``###`` and deeper stay in their section). A page of the documentation site is one
section, whatever its headings (``parse(text, file, sections=False)``): its examples continue from one
heading to the next, and the next page starts afresh.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Final, Literal

SHELL_LANGUAGES: Final = frozenset({"sh", "bash", "shell"})
RUN_LANGUAGES: Final = SHELL_LANGUAGES | {"python"}
FENCE: Final = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)")
MARKER: Final = re.compile(r"^<!--\s*readme:\s*(.*?)\s*-->\s*$")
SKIP: Final = re.compile(r"^skip\s*\((.+)\)$")
BACKGROUND: Final = re.compile(r'^background until "([^"]+)"$')
INTERRUPT: Final = re.compile(r"^interrupt after (\d+(?:\.\d+)?) s\s*\((.+)\)$")
PORT_NEIGHBOUR: Final = "0-9"

Mode = Literal["run", "skip", "background", "interrupt"]


class ReadmeFormatError(ValueError):
    """The file breaks a rule of the runner (an untagged fence, a marker without its reason)."""


@dataclasses.dataclass(frozen=True)
class Block:
    line: int  # the first line of code (1-based), for messages that point into the file
    language: str
    code: str
    section: str
    mode: Mode = "run"
    reason: str = ""  # skip and interrupt: why
    ready_text: str = ""  # background: the output that says it is ready
    interrupt_after_s: float = 0.0
    file: str = ""  # the document it comes from, for a run over several

    @property
    def is_shell(self) -> bool:
        return self.language in SHELL_LANGUAGES


def parse(text: str, file: str = "", *, sections: bool = True) -> list[Block]:
    """Every runnable block of ``text`` (the document ``file``) in order, with its marker and
    section; ``sections=False``: the whole document is one section."""
    blocks: list[Block] = []
    lines = text.splitlines()
    section = ""
    marker: tuple[int, str] | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = FENCE.match(line)
        if fence is None:
            if sections and line.startswith("## "):
                section = line[3:].strip()
            found = MARKER.match(line.strip())
            if found:
                marker = (index + 1, found.group(1))
            elif line.strip():
                marker = None
            index += 1
            continue
        indent, ticks, language = fence.groups()
        if not language:
            raise ReadmeFormatError(f"line {index + 1}: a fenced block without a language; name it (sh, python, "
                                    "toml, text, ...) so the runner knows whether to run it")
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(ticks[0] * len(ticks)):
            end += 1
        if end == len(lines):
            raise ReadmeFormatError(f"line {index + 1}: a fenced block that never closes")
        body = "\n".join(_dedent(lines[index + 1:end], len(indent))) + "\n"
        if language in RUN_LANGUAGES:
            blocks.append(dataclasses.replace(_block(index + 2, language, body, section, marker), file=file))
        elif marker is not None:
            raise ReadmeFormatError(f"line {marker[0]}: a readme marker before a {language} block, which never runs")
        marker = None
        index = end + 1
    return blocks


def _dedent(lines: list[str], width: int) -> list[str]:
    return [line[width:] if line[:width].isspace() else line for line in lines]


def _block(line: int, language: str, code: str, section: str, marker: tuple[int, str] | None) -> Block:
    if marker is None:
        return Block(line, language, code, section)
    where, text = marker
    if found := SKIP.match(text):
        return Block(line, language, code, section, "skip", reason=found.group(1).strip())
    if found := BACKGROUND.match(text):
        if language not in SHELL_LANGUAGES:
            raise ReadmeFormatError(f"line {where}: only a shell block can run in the background")
        return Block(line, language, code, section, "background", ready_text=found.group(1))
    if found := INTERRUPT.match(text):
        return Block(line, language, code, section, "interrupt", reason=found.group(2).strip(),
                     interrupt_after_s=float(found.group(1)))
    raise ReadmeFormatError(f"line {where}: unknown readme marker {text!r}; known: 'skip (why)', "
                            "'background until \"TEXT\"', 'interrupt after N s (why)'")


def substitute_ports(code: str, ports: Mapping[int, int]) -> str:
    """``code`` with each documented port replaced by the one the run uses (whole numbers only:
    8080 becomes 41234, 80800 stays)."""
    if not ports:
        return code
    pattern = re.compile(rf"(?<![{PORT_NEIGHBOUR}])({'|'.join(str(p) for p in ports)})(?![{PORT_NEIGHBOUR}])")
    return pattern.sub(lambda m: str(ports[int(m.group(1))]), code)
