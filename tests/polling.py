"""Waiting for what a cluster shows eventually: the one polling loop the cluster and controller tests share."""

from __future__ import annotations

import time
from typing import Any, Callable


def wait_for(condition: Callable[[], Any], timeout_s: float = 30.0, what: str = "condition") -> Any:
    """The first truthy result of ``condition``, asked every 0.1 s; an AssertionError naming ``what`` if none
    comes within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result := condition():
            return result
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout_s}s")
