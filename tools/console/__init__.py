"""The web console: a cluster's brokers, topics, messages, consumer groups and live rates in a browser.

It reads everything through odradek's own Kafka client (broker/network/kafka_client.py), as any admin client
would, so the same code serves odradek (``console.listener`` in ``odradek serve``) and any other
Kafka-compatible cluster (``odradek console --bootstrap-server``). See docs/console.md.

Nothing of it is imported unless the console is asked for: its web server (aiohttp) and templates (jinja2)
are the ``console`` extra, and ``odradek serve`` starts without them.
"""

from __future__ import annotations

import importlib.util

EXTRA = "console"
REQUIRED_MODULES = ("aiohttp", "jinja2")


def missing_modules() -> list[str]:
    """The console's libraries that are not installed (``pip install 'odradek[console]'`` brings them)."""
    return [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]


def missing_message() -> str:
    return f"the web console needs {', '.join(missing_modules())}: pip install 'odradek[{EXTRA}]'"
