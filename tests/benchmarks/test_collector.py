"""``collector_paused``: no collection inside a timed latency point, the collector as it was after."""

from __future__ import annotations

import gc

import pytest

from benchmarks.collector import collector_paused


def test_inside_the_collector_is_off_and_what_existed_is_frozen() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_collector_that_was_off_stays_off_even_when_the_block_fails() -> None:
    gc.disable()
    try:
        with pytest.raises(RuntimeError), collector_paused():
            raise RuntimeError("boom")
        assert not gc.isenabled()
        assert gc.get_freeze_count() == 0
    finally:
        gc.enable()
