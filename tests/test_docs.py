"""docs/architecture.md names modules by their path from the repository root (``broker/network/connection.py``,
folders as ``broker/replication/``); each one must exist, so the page cannot keep describing a module that
moved or went away (issue 22, item 7)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"

CODE_SPAN = re.compile(r"`([^`\n]+)`")
MODULE = re.compile(r"[\w/]+\.(?:py|c)")
FOLDER = re.compile(r"(?:protocol|storage|broker|controller|tools|tests|benchmarks|compat-tests|docs)/(?:[\w-]+/)*")


def named_paths(text: str) -> tuple[set[str], set[str]]:
    """(paths named, module names given without their folder) in ``text``'s code spans and diagram."""
    spans = set(CODE_SPAN.findall(text))
    diagram = "\n".join(re.findall(r"```\n(.*?)```", text, re.S))
    words = spans | {w.strip(";:,.()") if not w.endswith((".py", ".c")) else w for w in diagram.split()}
    modules = {w for w in words if MODULE.fullmatch(w)}
    folders = {w for w in words if FOLDER.fullmatch(w)}
    return {m for m in modules if "/" in m} | folders, {m for m in modules if "/" not in m}


def missing(text: str) -> list[str]:
    paths, bare = named_paths(text)
    return sorted(p for p in paths if not (ROOT / p).exists()) + sorted(f"{name} (name it by its path)" for name in bare)


def test_every_module_architecture_md_names_exists() -> None:
    paths, _ = named_paths(ARCHITECTURE.read_text())
    assert len(paths) > 40, "the page names the modules it describes"
    assert missing(ARCHITECTURE.read_text()) == []


def test_the_checker_sees_a_missing_module() -> None:
    text = "`broker/replication/partition.py` and `broker/partition.py`, `storage/`, `broker/gone/`, and `partition.py`\n"
    assert missing(text) == ["broker/gone/", "broker/partition.py", "partition.py (name it by its path)"]
