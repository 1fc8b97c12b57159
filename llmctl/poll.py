"""The one way llmctl waits for something: ask, and if the answer is not yet
the one wanted, sleep ``interval`` and ask again, until ``timeout`` seconds
have passed (measured on the monotonic clock). The last ask happens at the
deadline, so a wait never gives up without looking once more."""

from __future__ import annotations

import time
from typing import Callable, Iterator, Optional, TypeVar

T = TypeVar("T")


def poll_iter(timeout: Optional[float], interval: float, *, start: Optional[float] = None) -> Iterator[float]:
    """Yield the seconds elapsed since ``start`` (default: now) once per poll,
    sleeping ``interval`` between polls (less before the last, at the
    deadline); stop after the poll at ``timeout`` (None: never). A loop that
    runs out without ``break`` or ``return`` has timed out."""
    t0 = time.monotonic() if start is None else start
    while True:
        elapsed = time.monotonic() - t0
        yield elapsed
        if timeout is not None and time.monotonic() - t0 >= timeout:
            return
        left = None if timeout is None else timeout - (time.monotonic() - t0)
        time.sleep(interval if left is None else max(0.0, min(interval, left)))


def poll_until(check: Callable[[], Optional[T]], *, timeout: float, interval: float = 0.25,
               start: Optional[float] = None) -> Optional[T]:
    """``check()`` until it returns something truthy, which is returned; None
    once ``timeout`` seconds passed without (the caller says what timed out)."""
    for _ in poll_iter(timeout, interval, start=start):
        got = check()
        if got:
            return got
    return None
