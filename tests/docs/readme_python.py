"""A Python session for the README test: what a person gets from ``.venv/bin/python`` in the
repository, pasting one block after another into one interpreter.

Started as ``.venv/bin/python readme_python.py REPLY_FD`` in the working directory. Each request
is one JSON line on stdin, ``{"file", "line", "code", "env"}``: the environment is set to the
terminal's, the code is compiled so that tracebacks name the README's own lines, and run in one
namespace shared by the section's blocks. The answer goes to REPLY_FD as one JSON line,
``{"ok": bool, "error": str, "interrupted": bool}``; what the code prints goes to this process's
stdout and stderr, which the runner keeps. SIGINT (a person's Ctrl-C) interrupts the block.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any


def main() -> int:
    reply = os.fdopen(int(sys.argv[1]), "w", buffering=1)
    sys.path[0] = ""  # as `python` reading a script from stdin: the working directory comes first
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for request_line in sys.stdin:
        request = json.loads(request_line)
        os.environ.clear()
        os.environ.update(request["env"])
        answer: dict[str, Any] = {"ok": True, "error": "", "interrupted": False}
        try:
            code = compile("\n" * (request["line"] - 1) + request["code"], request["file"], "exec")
            exec(code, namespace)
        except KeyboardInterrupt:
            answer["interrupted"] = True
        except BaseException:
            answer = {"ok": False, "error": traceback.format_exc(), "interrupted": False}
        sys.stdout.flush()
        sys.stderr.flush()
        reply.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
