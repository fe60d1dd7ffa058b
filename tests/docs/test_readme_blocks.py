"""How the README runner reads a Markdown file: blocks, markers, sections, ports."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.docs.readme_blocks import ReadmeFormatError, parse, substitute_ports

DOC = """# Title

```sh
echo one
```

## First

<!-- readme: background until "logbroker ready" -->
```sh
make run
```

Some prose.

```python
print("two")
```

```toml
key = 1
```

### Deeper

<!-- readme: interrupt after 2 s (follows until Ctrl-C) -->

```bash
tail -f x
```

## Second

<!-- readme: skip (needs docker) -->
```shell
docker compose up
```
"""


def test_blocks_come_in_order_with_their_line_section_and_marker() -> None:
    blocks = parse(DOC)
    assert [(b.line, b.language, b.section, b.mode) for b in blocks] == [
        (4, "sh", "", "run"), (11, "sh", "First", "background"), (17, "python", "First", "run"),
        (29, "bash", "First", "interrupt"), (36, "shell", "Second", "skip")]
    assert blocks[0].code == "echo one\n"
    assert blocks[1].ready_text == "logbroker ready"
    assert (blocks[3].interrupt_after_s, blocks[3].reason) == (2.0, "follows until Ctrl-C")
    assert blocks[4].reason == "needs docker"


def test_prose_between_a_marker_and_its_block_detaches_the_marker() -> None:
    [block] = parse("<!-- readme: skip (why) -->\ntext\n```sh\nls\n```\n")
    assert block.mode == "run"


@pytest.mark.parametrize(("doc", "message"), [
    ("```\nls\n```\n", "without a language"),
    ("<!-- readme: skip -->\n```sh\nls\n```\n", "unknown readme marker"),
    ("<!-- readme: skip () -->\n```sh\nls\n```\n", "unknown readme marker"),
    ("<!-- readme: sometimes -->\n```sh\nls\n```\n", "unknown readme marker"),
    ('<!-- readme: background until "x" -->\n```python\npass\n```\n', "only a shell block"),
    ("<!-- readme: skip (why) -->\n```toml\na = 1\n```\n", "never runs"),
    ("```sh\nls\n", "never closes"),
])
def test_a_file_breaking_a_rule_is_refused_with_the_line(doc: str, message: str) -> None:
    with pytest.raises(ReadmeFormatError, match=message):
        parse(doc)


def test_documented_ports_are_replaced_as_whole_numbers() -> None:
    code = "curl localhost:8080/x; curl localhost:80800; --port 8080\nhttp://127.0.0.1:9092"
    assert substitute_ports(code, {8080: 41000, 9092: 42000}) == \
        "curl localhost:41000/x; curl localhost:80800; --port 41000\nhttp://127.0.0.1:42000"


@given(st.text(alphabet="0123456789 :/abc\n", max_size=60))
def test_text_without_a_documented_port_is_unchanged(code: str) -> None:
    ports = {8080: 41000}
    replaced = substitute_ports(code, ports)
    assert replaced.replace("41000", "8080") == code.replace("41000", "8080")
    if "8080" not in code:
        assert replaced == code


def test_a_site_page_is_one_section_and_its_blocks_name_their_file() -> None:
    blocks = parse(DOC, "docs/page.md", sections=False)
    assert {b.section for b in blocks} == {""}
    assert {b.file for b in blocks} == {"docs/page.md"}
    assert [b.line for b in blocks] == [b.line for b in parse(DOC)]
    assert {b.file for b in parse(DOC)} == {""}
