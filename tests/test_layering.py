"""The package's layering: ``protocol`` imports nothing of ours, ``storage`` only ``protocol``, and the
controller no broker (the broker wires itself to the controller, never the other way round).

The wire format and the log format are usable on their own (dump-log, the Spark data source, tests)
only as long as they never reach up into the broker; an import that does would also drag the
broker's event loop and config into every tool. Imports are read with ``ast`` so that an import
inside a function counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "odradek"

# layer -> the layers of ours it may import (itself always allowed)
ALLOWED: dict[str, frozenset[str]] = {
    "protocol": frozenset(),
    "storage": frozenset({"protocol"}),
    "controller": frozenset({"protocol", "storage"}),
}


def imported_layers(path: Path) -> set[tuple[int, str]]:
    """(line, layer) for every import of one of our top-level packages in ``path``."""
    found: set[tuple[int, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: relative import; write it absolute"
            names = [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == PACKAGE and len(parts) > 1:
                found.add((node.lineno, parts[1]))
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_is_below_it(layer: str) -> None:
    sources = sorted((ROOT / layer).rglob("*.py"))
    assert sources, f"no sources under {layer}/"
    violations = [
        f"{path.relative_to(ROOT)}:{line} imports {PACKAGE}.{imported}"
        for path in sources
        for line, imported in sorted(imported_layers(path))
        if imported != layer and imported not in ALLOWED[layer]
    ]
    assert violations == []


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """Guards the test above against passing because it reads nothing."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from odradek.broker.config import KafkaConfig\n")
    assert imported_layers(module) == {(2, "broker")}
