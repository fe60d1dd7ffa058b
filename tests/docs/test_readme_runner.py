"""The README runner on small documents: what carries between blocks, what fails and how it says
so, and that everything it starts is stopped, also after a failure."""

from __future__ import annotations

import os
import time

from tests.conftest import ROOT
from tests.docs.readme_blocks import parse
from tests.docs.readme_runner import ReadmeRun
from tests.support.processes import alive

DOC = """## One

<!-- readme: background until "serving" -->
```sh
echo $$ > server.pid; echo serving; exec sleep 600
```

```sh
GREETING=hello
export PORT_SEEN=8080
```

```sh
echo "$GREETING $PORT_SEEN" > greeting.txt
test "$(cat greeting.txt)" = "hello $RUN_PORT"
```

```python
import os
seen = os.environ["PORT_SEEN"]
```

```python
assert seen == os.environ["RUN_PORT"], seen
```

<!-- readme: interrupt after 1 s (follows until Ctrl-C) -->
```sh
sleep 600
```

## Two

```sh
test -z "${GREETING:-}"
```

```python
assert "seen" not in globals()
```

```sh
false
echo never
```

```sh
echo "not run: the section failed above"
```

## Three

<!-- readme: skip (cannot run here) -->
```sh
exit 1
```

```python
raise RuntimeError("from the README")
```
"""



def test_blocks_share_a_section_fail_with_their_line_and_leave_nothing_running() -> None:
    blocks = parse(DOC)
    with ReadmeRun(ROOT, "DOC.md") as run:
        outcomes = run.run(blocks)
        with open(os.path.join(run.work, "server.pid"), encoding="utf-8") as f:
            server = int(f.read())
        assert alive(server)
    deadline = time.monotonic() + 10
    while alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(server)
    assert not os.path.exists(run.work)
    results = {o.block.line: o for o in outcomes}
    assert [line for line, o in results.items() if o.ok] == [5, 9, 14, 19, 24, 29, 35, 39]
    failed = {line: o.describe("DOC.md") for line, o in results.items() if not o.ok}
    assert list(failed) == [43, 59]
    assert failed[43].startswith("DOC.md line 43 (sh, section 'Two'): exit status 1")
    assert "never" not in failed[43]
    assert "DOC.md\", line 59" in failed[59] and "RuntimeError: from the README" in failed[59]
    assert 48 not in results and 55 not in results  # after its section failed; skipped
