"""The offset and time indexes on a disk that fills."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.small_disks import fill, tmpfs

APPEND_ON_A_FULL_DISK = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from odradek.storage.indexes import OffsetIndex, TimeIndex
    disk = Path(sys.argv[1])
    offsets = OffsetIndex(disk / "00000000000000000000.index", 0, 10 * 1024 * 1024)
    times = TimeIndex(disk / "00000000000000000000.timeindex", 0, 10 * 1024 * 1024)
    (disk / "filler").write_bytes(b"")  # the test fills the disk now
    input()
    for index, entry in ((offsets, (10, 4096)), (times, (1000, 10))):
        try:
            index.append(*entry) if index is offsets else index.maybe_append(*entry)
            print("appended")
        except OSError as exc:
            print("OSError", exc.errno)
    """
)


def test_an_entry_written_on_a_full_disk_is_an_oserror_not_a_crash(tmp_path: Path) -> None:
    """A new index is sparse (as Kafka's preallocated one is), so its first entry takes a page of the disk.
    Written through the mapping on a full disk, that page is refused with SIGBUS, which killed the broker
    (Kafka's JVM turns it into an error); written with pwrite it is ENOSPC, the OSError the partition turns
    into the log directory's failure. In a child process, so that a SIGBUS shows as its exit status."""
    with tmpfs(tmp_path / "disk", "1m") as disk:
        child = subprocess.Popen([sys.executable, "-c", APPEND_ON_A_FULL_DISK, str(disk)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            while not (disk / "filler").exists() and child.poll() is None:
                time.sleep(0.01)
            fill(disk)
            out, err = child.communicate("\n", timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
    assert child.returncode == 0, f"the index writer died ({child.returncode}): {err}"
    assert out.split("\n")[:2] == ["OSError 28", "OSError 28"], out + err
