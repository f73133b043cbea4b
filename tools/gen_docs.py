"""Render the docs that tables define: docs/configuration.md and docs/protocol.md.

The config tables (``odradek.broker.config``, ``odradek.storage.log_config``) are the one definition of every
key: they parse ``server.properties``, answer DescribeConfigs and write docs/configuration.md. The dispatch
table (``odradek.broker.kafka_apis.HANDLERS``) is what ApiVersions advertises and writes docs/protocol.md.
``tests/tools/test_generated_docs.py`` fails when a committed document is not what this renders.

Usage: ``python -m odradek.tools.gen_docs`` (rewrites both files in docs/)
"""

from __future__ import annotations

from pathlib import Path

from odradek.broker.config import BROKER_CONFIG
from odradek.storage.config_types import ConfigKey
from odradek.storage.log_config import TOPIC_CONFIG


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(key: ConfigKey, extra: str = "") -> str:
    default = key.render(key.default)
    default_text = "null" if default is None else f"`{default}`" if default != "" else '""'
    doc = _cell(key.doc)
    if not key.acted_on:
        doc += " *(accepted for compatibility; odradek does not act on it)*"
    return f"| `{key.name}` | {key.type.name} | {default_text} | {extra}{doc} |"


DOCS = Path(__file__).resolve().parents[1] / "docs"


def render_configuration() -> str:
    lines = [
        "# Configuration",
        "",
        "Generated from the config tables by `python -m odradek.tools.gen_docs`; do not edit by hand.",
        "",
        "## Broker (`server.properties`, `odradek serve --override key=value`)",
        "",
        "Keys as Apache Kafka names them. Unknown keys are warned about at start; invalid values stop the broker",
        "with a message naming the key.",
        "",
        "| key | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    lines += [_row(k) for k in BROKER_CONFIG]
    lines += [
        "",
        "## Topic (CreateTopics configs, AlterConfigs, IncrementalAlterConfigs)",
        "",
        "A topic's value is its own override if set, else the broker key it falls back to, else the default.",
        "",
        "| key | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    for key in TOPIC_CONFIG:
        synonyms = getattr(key, "synonyms", ())
        fallback = f"Broker fallback: {', '.join(f'`{s.name}`' for s in synonyms)}. " if synonyms else ""
        lines.append(_row(key, fallback))
    return "\n".join(lines) + "\n"


def render_protocol() -> str:
    from odradek.broker.kafka_apis import HANDLERS
    from odradek.protocol.api import APIS

    lines = [
        "# Protocol coverage",
        "",
        "Generated from the dispatch table by `python -m odradek.tools.gen_docs`; do not edit by hand.",
        "",
        "Every API key a Kafka 3.9 broker listens for is declared in `protocol/messages/` for all of its",
        "versions (checked against Kafka's JSON specs). The broker serves, and ApiVersions advertises, the",
        "versions below; a request for any other API key closes the connection, as Kafka does, and an",
        "unsupported version of a served API closes it too (ApiVersions answers UNSUPPORTED_VERSION in v0).",
        "",
        "| key | API | served versions | Kafka 3.9 versions |",
        "| --- | --- | --- | --- |",
    ]
    for key, api in sorted(APIS.items()):
        handler = HANDLERS.get(key)
        served = f"{handler.min_version}-{handler.max_version}" if handler else "not served"
        lines.append(f"| {key} | {api.name} | {served} | {api.min_version}-{api.max_version} |")
    return "\n".join(lines) + "\n"


RENDERERS = {"configuration.md": render_configuration, "protocol.md": render_protocol}


def main() -> None:
    for name, render in RENDERERS.items():
        (DOCS / name).write_text(render())


if __name__ == "__main__":
    main()
