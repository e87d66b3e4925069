"""Waiting for something another process or thread does."""

from __future__ import annotations

import time


def wait_until(predicate, *, timeout: float = 60, what: str = "condition", interval: float = 0.1):
    """Call `predicate` until it returns something truthy and return that; fail
    after `timeout` seconds, naming `what` was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
