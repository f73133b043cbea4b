"""Every source package is listed in pyproject.toml: the package list is explicit, and a package missing
from it works in the editable checkout but is absent from an installed wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("protocol", "storage", "broker", "controller", "tools")


def source_packages() -> dict[str, str]:
    """Dotted package name -> its directory, for every directory under a layer holding ``__init__.py``."""
    found = {"odradek": "."}
    for layer in LAYERS:
        for init in sorted((ROOT / layer).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT)
            found[".".join(("odradek", *rel.parts))] = rel.as_posix()
    return found


def test_every_package_is_listed_and_mapped() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = source_packages()
    assert len(packages) > len(LAYERS)
    assert sorted(setuptools["packages"]) == sorted(packages)
    assert setuptools["package-dir"] == packages
