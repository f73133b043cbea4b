"""Disks that fill: a tmpfs of a given size mounted for a test (the tests run as root), and a file that takes
its last byte. Shared by the single-broker and the cluster full-disk tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    """``mount_point`` (made if missing) as a tmpfs of ``size`` (mount's syntax: ``8m``, ``64M``), unmounted
    afterwards (lazily: a broker killed a moment ago may still hold a file there)."""
    mount_point.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)], check=True, timeout=30)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True, timeout=30)


def fill(disk: Path) -> Path:
    """Write a file until the disk has no space left; removing it gives the space back."""
    filler = disk / "filler"
    try:
        f = open(filler, "wb", buffering=0)  # unbuffered: nothing left to flush (and fail) at the close
    except OSError as exc:
        # Seen twice in full runs, never alone: ENOSPC at the open, the disk full before the filler exists.
        # On a tmpfs that is odd: a tmpfs whose blocks are all taken still lets an empty file be created, and
        # its inodes (3 million here, whatever its size) run out first only with millions of files. So say
        # which file system the path is on, its blocks and inodes left, and what is on it.
        usage = subprocess.run(["du", "-ak", str(disk)], capture_output=True, text=True, timeout=30).stdout
        biggest = sorted(usage.splitlines(), key=lambda line: -int(line.split()[0]))[:15]
        mount = subprocess.run(["findmnt", "--target", str(disk), "-o", "TARGET,SOURCE,FSTYPE,OPTIONS"], capture_output=True, text=True, timeout=30).stdout
        stat = os.statvfs(disk)
        left = f"{stat.f_bavail * stat.f_frsize // 1024} KiB of {stat.f_blocks * stat.f_frsize // 1024} KiB and {stat.f_favail} of {stat.f_files} inodes free"
        raise AssertionError(f"{disk} is full before the filler was made ({exc}); {left}; mounted as\n{mount}its biggest entries:\n" + "\n".join(biggest)) from exc
    with f:
        try:
            while True:
                f.write(b"\0" * 65536)  # a short write near the end, then ENOSPC
        except OSError as exc:
            assert exc.errno == 28, exc
    return filler
