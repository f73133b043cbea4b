"""odradek: an Apache Kafka broker in Python.

The top-level package stays light: importing ``odradek`` must not pull in the broker (and its event loop
machinery) for users who only need the protocol or storage layers, so ``Broker`` is resolved lazily.
"""

from typing import Any

__version__ = "0.1.0"

__all__ = ["Broker", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from odradek.broker.embedded_broker import Broker

        return Broker
    raise AttributeError(name)
