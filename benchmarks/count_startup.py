"""Counts a start-up cut in instructions, the way issue 21's rounds compare them (docs/performance.md, "Start-up").

``python benchmarks/count_startup.py [TREE ...] [--runs N]``: for each source tree (a checkout of odradek
with its C extensions built, e.g. a ``git worktree`` of the commit before a change), or for the installed
odradek when none is named, the instructions valgrind counts beyond the interpreter's own start for

* ``Broker()``'s start alone (:data:`bench_startup.COUNTED`), and
* the start and a first test's first five requests (:data:`bench_startup.FIRST_REQUESTS`): a cut that only
  moved work to a first request shows here as no gain.

A tree is imported from ``PYTHONPATH`` (which costs ~4 M instructions more than the editable install), so
compare trees with trees. The start alone repeats to ~0.01%; the first requests vary with the broker's timers
under valgrind's slow clock (more under load), so each figure is the least of ``--runs`` (default 3).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_startup import BARE, COUNTED, ENV, FIRST_REQUESTS, first_requests, instructions


def count(tree: Path | None, runs: int, frames: list[str]) -> tuple[int, int]:
    """The least start and start-with-first-requests counts of ``runs`` runs, beyond the interpreter's start."""
    with tempfile.TemporaryDirectory() as d:
        ENV.pop("PYTHONPATH", None)
        if tree is not None:  # instructions() runs its child with bench_startup's ENV
            (Path(d) / "odradek").symlink_to(tree.resolve())
            ENV["PYTHONPATH"] = d
        subprocess.run([sys.executable, "-c", FIRST_REQUESTS, f"{d}/warm", *frames], env=ENV, check=True, timeout=120)  # bytecode caches
        bare = min(instructions(["-c", BARE]) for _ in range(runs))
        start = min(instructions(["-c", COUNTED, f"{d}/start{i}"]) for i in range(runs))
        first = min(instructions(["-c", FIRST_REQUESTS, f"{d}/first{i}", *frames]) for i in range(runs))
    return start - bare, first - bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", type=Path, help="odradek checkouts to compare (default: the installed one)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    frames = first_requests()
    for tree in args.trees or [None]:
        start, first = count(tree, args.runs, frames)
        print(f"{tree or 'installed'}: start {start / 1e6:.1f} M, start and first five requests {first / 1e6:.1f} M (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
