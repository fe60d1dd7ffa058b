"""Per-user defaults as a share of what the node has (pure).

A node-wide budget that one user can fill is a denial of service for everyone else, admins
included: the partition budget follows the descriptor limit (``logbroker.descriptors``), the
storage is the data directory's file system. So the node's default ``partitions_max`` and
``storage_bytes_max`` (``QUOTA_AUTO`` in the configuration) are a quarter of those: a user at the
defaults leaves three quarters to the others. An operator's explicit value, and an admin's
per-user override, stand as given.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from logbroker.auth.quotas import QuotaLimits
from logbroker.config import QUOTA_AUTO

USER_SHARE_DIVISOR: Final = 4
# The default before it was a share; kept as a ceiling, as each partition also costs memory.
PARTITIONS_PER_USER_MAX: Final = 4_000


def partitions_share(node_partitions_max: int) -> int:
    return max(1, min(PARTITIONS_PER_USER_MAX, node_partitions_max // USER_SHARE_DIVISOR))


def storage_share(disk_bytes: int | None) -> int:
    """A quarter of the file system; 0 (unlimited) when its size is not known."""
    return 0 if not disk_bytes else max(1, disk_bytes // USER_SHARE_DIVISOR)


def resolve_shares(limits: QuotaLimits, *, node_partitions_max: int, disk_bytes: int | None) -> QuotaLimits:
    """``limits`` with every ``QUOTA_AUTO`` replaced by the node's share."""
    changes: dict[str, int] = {}
    if limits.partitions_max == QUOTA_AUTO:
        changes["partitions_max"] = partitions_share(node_partitions_max)
    if limits.storage_bytes_max == QUOTA_AUTO:
        changes["storage_bytes_max"] = storage_share(disk_bytes)
    return dataclasses.replace(limits, **changes)
