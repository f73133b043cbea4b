"""Render docs/configuration.md from the broker and topic config tables.

The tables in ``odradek.broker.config`` and ``odradek.storage.log_config`` are the one definition of every
key: they parse ``server.properties``, answer DescribeConfigs and, through this module, write the docs.
``tests/tools/test_config_docs.py`` fails when the committed document is not what this renders.

Usage: ``python -m odradek.tools.gen_config_docs > docs/configuration.md``
"""

from __future__ import annotations

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


def render() -> str:
    lines = [
        "# Configuration",
        "",
        "Generated from the config tables by `python -m odradek.tools.gen_config_docs`; do not edit by hand.",
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


def main() -> None:
    print(render(), end="")


if __name__ == "__main__":
    main()
