"""Run the benchmarks in this folder and print one table: ``python benchmarks/run.py [name ...]``.

Each ``bench_<name>.py`` is one module. A module with a top-level ``run()`` returns its measurements as
:class:`Result` (or mappings with the same keys) and the runner prints them; any other module is executed
as a script and prints what it likes. Names on the command line select modules by substring of ``<name>``
(``python benchmarks/run.py protocol`` runs ``bench_protocol.py``). See README.md.
"""

from __future__ import annotations

import ast
import importlib.util
import runpy
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

HERE = Path(__file__).resolve().parent

__all__ = ["Result", "measure", "main"]


@dataclass(frozen=True)
class Result:
    name: str
    value: float
    unit: str


def measure(fn: Callable[[], Any], *, min_time: float = 0.3, repeat: int = 3) -> float:
    """Calls per second of ``fn``: the best of ``repeat`` rounds of at least ``min_time`` seconds each.

    The best round, not the mean, because the machine is shared and interference only ever slows a round.
    """
    fn()  # warm caches (compiled codecs, imports) outside the timing
    best = 0.0
    for _ in range(repeat):
        calls = 0
        start = time.perf_counter()
        deadline = start + min_time
        while True:
            fn()
            calls += 1
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, calls / (now - start))
    return best


def discover(filters: Iterable[str]) -> list[Path]:
    wanted = list(filters)
    modules = sorted(HERE.glob("bench_*.py"))
    return [p for p in modules if not wanted or any(w in p.stem.removeprefix("bench_") for w in wanted)]


def defines_run(path: Path) -> bool:
    """Whether the module has a top-level ``run`` function (checked without executing it)."""
    tree = ast.parse(path.read_text(), str(path))
    return any(isinstance(node, ast.FunctionDef) and node.name == "run" for node in tree.body)


def as_result(item: Any) -> Result:
    if isinstance(item, dict):
        return Result(str(item["name"]), float(item["value"]), str(item["unit"]))
    return Result(str(item.name), float(item.value), str(item.unit))


def run_module(path: Path) -> list[Result] | None:
    """The module's results, or None when it ran as a script and printed its own."""
    if not defines_run(path):
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as exc:  # a script's ``sys.exit(main())`` ends the script, not the runner
            if exc.code not in (None, 0):
                raise RuntimeError(f"{path.name} exited with {exc.code}") from None
        return None
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look modules up by name
    spec.loader.exec_module(module)
    return [as_result(item) for item in module.run()]


def format_value(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def print_table(rows: list[tuple[str, Result]]) -> None:
    headers = ("module", "benchmark", "value", "unit")
    cells = [(module, r.name, format_value(r.value), r.unit) for module, r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    line = "  ".join
    print(line(h.ljust(w) if i != 2 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths))))
    print(line("-" * w for w in widths))
    for c in cells:
        print(line(v.ljust(w) if i != 2 else v.rjust(w) for i, (v, w) in enumerate(zip(c, widths))))
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = discover(args)
    if not paths:
        print(f"no benchmark matches {' '.join(args)}; available: {', '.join(p.stem.removeprefix('bench_') for p in discover([]))}")
        return 2
    rows: list[tuple[str, Result]] = []
    failed = []
    for path in paths:
        name = path.stem.removeprefix("bench_")
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            results = run_module(path)
        except Exception:  # one broken benchmark must not hide the others' figures
            traceback.print_exc()
            failed.append(name)
            continue
        rows.extend((name, r) for r in results or ())
    if rows:
        print_table(rows)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


# Benchmark modules write ``from run import Result, measure``: make that name this very module when it is
# the entry point, so there is one Result class, and keep this folder importable for them.
sys.modules.setdefault("run", sys.modules[__name__])
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

if __name__ == "__main__":
    sys.exit(main())
