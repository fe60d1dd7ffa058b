"""Shared test set-up: every asyncio test runs on uvloop, the node's event loop."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import uvloop
from hypothesis import HealthCheck, settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


def pytest_asyncio_loop_factories(config: Any, item: Any) -> Mapping[str, Callable[[], Any]]:
    return {"uvloop": uvloop.new_event_loop}
