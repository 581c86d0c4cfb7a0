"""The client's retry policy: exponential backoff with full jitter, never earlier than Retry-After."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Statuses that say "not processed, or unknown; the same request is safe again" (the key makes a
# POST safe). 501 and 505 will not heal by waiting.
_NOT_RETRYABLE_5XX = frozenset({501, 505})


def retryable_status(code: int) -> bool:
    if code in (408, 425, 429):
        return True
    return code >= 500 and code not in _NOT_RETRYABLE_5XX


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a Retry-After header asks for (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True)
class RetryPolicy:
    """How a call is retried while its outcome is unknown or transient (pkg/client's defaults).

    ``max_elapsed`` is the budget from the first attempt to the start of the last; a server's
    Retry-After longer than what is left ends the call at once. ``attempt_timeout`` bounds one
    attempt (until its headers, and the body of small JSON answers).
    """

    base_delay: float = 0.25
    max_delay: float = 15.0
    max_elapsed: float = 120.0
    max_attempts: int = 0
    attempt_timeout: float = 30.0
    rand: Callable[[], float] = field(default=random.random, compare=False)

    def backoff(self, n: int, server_wait: float | None = None) -> float:
        """The delay before retry n (0 = the first): uniform in [0, min(max_delay, base·2ⁿ)),
        but never shorter than the server's Retry-After."""
        cap = min(self.max_delay, self.base_delay * (2.0 ** min(n, 30)))
        return max(cap * self.rand(), server_wait or 0.0)


def jitter(seconds: float) -> float:
    """seconds spread by ±20%, so workers that failed together do not retry together."""
    return max(0.0, seconds * (0.8 + 0.4 * random.random()))
