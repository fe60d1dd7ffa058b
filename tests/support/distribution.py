"""What setup.cfg says the distribution is: the packages it ships and the requirements of the base
install (the client) and of each extra (decision 0279)."""

from __future__ import annotations

import configparser
import os
import re

from tests.conftest import ROOT

SERVER_EXTRA = "server"


def _setup() -> configparser.ConfigParser:
    setup = configparser.ConfigParser()
    setup.read(os.path.join(ROOT, "setup.cfg"))
    return setup


def shipped_packages() -> tuple[str, ...]:
    """The top-level packages ``packages = find:`` installs (its include patterns, ``name*``)."""
    patterns = _setup()["options.packages.find"]["include"].split()
    assert all(p.endswith("*") and p[:-1].isidentifier() for p in patterns), patterns
    return tuple(p[:-1] for p in patterns)


def requirement_names(extra: str | None = None) -> set[str]:
    """The normalised distribution names the base install (``extra=None``) or an extra requires."""
    setup = _setup()
    text = setup["options"]["install_requires"] if extra is None else setup["options.extras_require"][extra]
    return {normalise(re.split(r"[<>=!~;\[ ]", line.strip(), maxsplit=1)[0])
            for line in text.splitlines() if line.strip() and not line.strip().startswith("#")}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
