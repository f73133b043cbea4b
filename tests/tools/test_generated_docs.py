import pytest

from odradek.tools.gen_docs import DOCS, RENDERERS


@pytest.mark.parametrize("name", sorted(RENDERERS))
def test_generated_doc_is_up_to_date(name: str) -> None:
    assert (DOCS / name).read_text() == RENDERERS[name](), "run: python -m odradek.tools.gen_docs"


def test_every_broker_and_topic_key_is_documented() -> None:
    from odradek.broker.config import BROKER_CONFIG
    from odradek.storage.log_config import TOPIC_CONFIG

    text = (DOCS / "configuration.md").read_text()
    for key in (*BROKER_CONFIG, *TOPIC_CONFIG):
        assert f"| `{key.name}` |" in text


def test_protocol_doc_lists_what_api_versions_advertises() -> None:
    from odradek.broker.kafka_apis import HANDLERS

    text = (DOCS / "protocol.md").read_text()
    for key, handler in HANDLERS.items():
        assert f"| {handler.min_version}-{handler.max_version} |" in text.split(f"| {key} |")[1].split("\n")[0]
