"""The pure rules of creation on first use: which routes create (writes only, only with the
setting on) and the allowance (a queue is two names; admins exempt)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import http_api.app  # noqa: F401 (registers every route)
from http_api.first_use import FIRST_USE, first_use_kind
from http_api.routing import ROUTES
from logbroker.auth.permissions import Principal
from logbroker.errors import TooManyRequestsError
from logbroker.first_use import OWNED_LIMIT, check_allowance


def test_only_writes_create_and_only_when_the_setting_is_on() -> None:
    for entry in ROUTES:
        kind = first_use_kind(entry.method, entry.path, "on")
        assert (kind is not None) == ((entry.method, entry.path) in FIRST_USE)
        if kind is not None:
            assert entry.access == "write" and entry.method == "POST", entry.path
        assert first_use_kind(entry.method, entry.path, "off") is None
    assert {(m, p) for m, p in FIRST_USE} <= {(e.method, e.path) for e in ROUTES}, "every first-use route exists"


@given(st.integers(0, 30), st.sampled_from(["topic", "queue"]), st.integers(0, 30), st.booleans())
def test_the_allowance_counts_names_owned_and_exempts_admins(owned: int, kind: str, owned_max: int,
                                                             admin: bool) -> None:
    principal = Principal("ann", "admin" if admin else "user")
    fits = admin or owned + (2 if kind == "queue" else 1) <= owned_max
    if fits:
        check_allowance(principal, owned, kind, owned_max)  # type: ignore[arg-type]
        return
    with pytest.raises(TooManyRequestsError) as refused:
        check_allowance(principal, owned, kind, owned_max)  # type: ignore[arg-type]
    assert OWNED_LIMIT in str(refused.value) and refused.value.extra["limit_value"] == owned_max
