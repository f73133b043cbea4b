import pytest

from odradek.tools.gen_docs import DOCS, RENDERERS


@pytest.mark.parametrize("name", sorted(RENDERERS))
def test_generated_doc_is_up_to_date(name: str) -> None:
    assert (DOCS / name).read_text() == RENDERERS[name](), "run: python -m odradek.tools.gen_docs"
