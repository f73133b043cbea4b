"""The generated static types of requests and responses (``protocol/message_types``) match the codec.

mypy checks handlers against these classes; they are only worth that if they are exactly what decoding
yields and encoding accepts, and if they are regenerated whenever the declarations change."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from odradek.protocol.messages import MODULES
from odradek.protocol.schema import decode, encode
from odradek.tools.gen_message_types import generate

REPO = Path(__file__).resolve().parents[2]


REGENERATE = "protocol/messages changed: run `python -m odradek.tools.gen_message_types` and commit protocol/message_types"


def test_committed_modules_are_what_the_generator_writes(tmp_path: Path) -> None:
    generate(tmp_path)
    committed = REPO / "protocol" / "message_types"
    generated = sorted(p.name for p in tmp_path.glob("*.py"))
    assert generated == sorted(p.name for p in committed.glob("*.py")), REGENERATE
    assert [name for name in generated if (tmp_path / name).read_text() != (committed / name).read_text()] == [], REGENERATE


@pytest.mark.parametrize("api_key", sorted(MODULES))
def test_a_decoded_message_has_the_attributes_its_type_declares(api_key: int) -> None:
    """At every version, a decoded request and response carry exactly the fields of their Protocol class, and
    their Dict class accepts exactly those keys."""
    module = MODULES[api_key]
    types = importlib.import_module(f"odradek.protocol.message_types.{module.__name__.rsplit('.', 1)[1]}")
    for message in (module.REQUEST, module.RESPONSE):
        declared = set(getattr(types, message.name).__annotations__)
        assert set(getattr(types, f"{message.name}Dict").__annotations__) == declared
        for version in message.versions():
            value, _ = decode(message, version, encode(message, version, {}))
            assert set(value) == declared, f"{message.name} v{version}"
