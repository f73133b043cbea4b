"""Where the group handlers reach the group coordinator (the runtime itself is :mod:`odradek.broker.coordinator`).

``server.coordinators["group"]`` is the group coordinator's
:class:`~odradek.broker.coordinator.runtime.CoordinatorRuntime`: ``.coordinator`` is the
:class:`~odradek.broker.group_coordinator.GroupCoordinator` the handlers call and ``.respond`` awaits its
answers. This accessor stays until the handlers are handed the service directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.broker.coordinator.runtime import CoordinatorRuntime


def group_coordinator(server: Any) -> "CoordinatorRuntime[Any]":
    return server.coordinators["group"]
