from pathlib import Path

from odradek.tools.gen_config_docs import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_configuration_doc_is_rendered_from_the_config_tables() -> None:
    assert DOC.read_text() == render(), "run: python -m odradek.tools.gen_config_docs > docs/configuration.md"


def test_every_broker_and_topic_key_is_documented() -> None:
    from odradek.broker.config import BROKER_CONFIG
    from odradek.storage.log_config import TOPIC_CONFIG

    text = DOC.read_text()
    for key in (*BROKER_CONFIG, *TOPIC_CONFIG):
        assert f"| `{key.name}` |" in text
