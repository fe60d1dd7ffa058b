"""How often a user may try to change their own password (pure: time comes from the caller).

Each attempt costs two scrypt hashes (the current password checked, the new one hashed) and, with
a stolen token, is a way to guess the current password; so attempts are budgeted per user: at most
``BURST`` at once, then one more each ``INTERVAL_S`` (a token bucket). An attempt over the budget
is refused before any hashing (429 with ``Retry-After``: when the next one is allowed). Every
attempt that gets that far is counted, whether the current password was right or not. At most
``USERS_MAX`` users are tracked, the least recently seen dropped first (their budget starts full
again). An admin resetting another user's password is not budgeted here (decision 0237).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from logbroker.errors import TooManyRequestsError

BURST: Final = 3
INTERVAL_S: Final = 60.0
USERS_MAX: Final = 100_000


class PasswordChanges:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._budgets: dict[str, tuple[float, float]] = {}  # user -> (attempts left, at time)

    def take(self, user: str) -> None:
        """Count one attempt of ``user``; ``TooManyRequestsError`` (nothing counted) over the budget."""
        now = self._clock()
        left, at = self._budgets.pop(user, (float(BURST), now))
        left = min(float(BURST), left + max(0.0, now - at) / INTERVAL_S)
        if left < 1:
            self._budgets[user] = (left, now)
            wait = (1 - left) * INTERVAL_S
            raise TooManyRequestsError(f"too many password changes for {user!r}; retry in {math.ceil(wait)} s",
                                       retry_after_s=math.ceil(wait * 1000) / 1000)
        self._budgets[user] = (left - 1, now)  # most recently seen last
        if len(self._budgets) > USERS_MAX:
            del self._budgets[next(iter(self._budgets))]
