"""The permission rules as properties over every principal, action, owner and ACL."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from logbroker.auth.permissions import ACTIONS, Principal, allowed

NAMES = st.sampled_from(["alice", "bob", "carol"])
PERMS = st.frozensets(st.sampled_from(["read", "write"]))
ACLS = st.dictionaries(NAMES, PERMS)


@given(NAMES, st.sampled_from(ACTIONS), st.none() | NAMES, ACLS)
def test_rules(name, action, owner, acl):
    user = Principal(name, "user")
    assert allowed(Principal(name, "admin"), action, owner, acl), "admins may do anything"
    result = allowed(user, action, owner, acl)
    if owner == name:
        assert result, "owners may do anything to their topic"
    elif action == "manage":
        assert not result, "managing is never grantable"
    elif action == "describe":
        assert result == bool(acl.get(name))
    else:
        assert result == (action in acl.get(name, frozenset()))


def test_ownerless_topics_are_for_admins_and_grants():
    assert not allowed(Principal("anonymous", "user"), "read", None, {})
    assert allowed(Principal("bob", "user"), "read", None, {"bob": frozenset({"read"})})
