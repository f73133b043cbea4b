"""A segment's ``.index`` and ``.timeindex``: Kafka's sparse, memory-mapped, fixed-width indexes.

Both files are arrays of big-endian entries keyed by an offset relative to the segment's base offset:

- ``.index``:     relativeOffset int32, position int32 (8 bytes per entry)
- ``.timeindex``: timestamp int64, relativeOffset int32 (12 bytes per entry)

As in Kafka, a new index is preallocated to ``segment.index.bytes`` (rounded down to whole entries) and
memory-mapped; the number of valid entries is tracked in memory, and the file is trimmed to exactly those
entries when the segment stops being active or the log closes. An index opened from disk therefore holds
``file size / entry size`` entries -- which is why an active segment's index left preallocated by a crash
must be rebuilt (recovery does), and why every index opened lazily is sanity-checked first.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from array import array
from pathlib import Path

INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1
_WARM_SECTION_BYTES = 8192
"""Kafka's AbstractIndex searches the entries in the index's last 8 KiB before the rest."""


class CorruptIndexError(Exception):
    """An index whose content cannot be trusted; the segment's indexes are rebuilt from its log."""


class InvalidOffsetError(Exception):
    """An index append that would break the index's ordering (a bug upstream, never a client error)."""


class CorruptTransactionIndexError(Exception):
    """A transaction index entry of a version newer than this broker reads (Kafka's read throws a
    ``KafkaException``). Here, not in :mod:`.transaction_index`, so that the fetch path names it without
    importing the transaction index, which a broker whose producers never abort a transaction never opens."""


class _Index:
    """The shared file/mmap mechanics of Kafka's AbstractIndex."""

    ENTRY = struct.Struct(">ii")

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, writable: bool = True) -> None:
        """``writable=False`` opens an existing index for the offline tools: read once, never mapped (a broker
        truncating a file under a mapping would kill the tool with SIGBUS), never created or resized; every
        whole entry in the file counts, a preallocated index's zeroed tail included, as when Kafka opens it."""
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        entry_size = self.ENTRY.size
        self._mm: mmap.mmap | bytes | None
        if not writable:
            self._fd = -1
            with open(path, "rb") as f:
                self._mm = f.read()
            self._length = len(self._mm)
            self.max_entries = self._length // entry_size
            self.entries = self._length // entry_size
            self._load_last_entry()
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        self._fd = fd
        length = os.fstat(fd).st_size
        newly_created = length == 0
        if newly_created:
            if max_index_size < entry_size:
                raise ValueError(f"Invalid max index size: {max_index_size}")
            length = _round_down(max_index_size, entry_size)
            os.ftruncate(fd, length)
        self._length = length
        self.max_entries = length // entry_size
        """The entries the file has room for (an attribute: read at every append, by the roll check)."""
        self._mm = mmap.mmap(fd, length) if length else None
        self.entries = 0 if newly_created else length // entry_size
        self._load_last_entry()

    # -- geometry ------------------------------------------------------------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        return self._length

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise InvalidOffsetError(f"Integer overflow for offset: {offset} ({self.path})")
        return relative

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def entry(self, slot: int) -> tuple[int, int]:
        assert self._mm is not None
        return self.ENTRY.unpack_from(self._mm, slot * self.ENTRY.size)

    def _write_entry(self, slot: int, first: int, second: int) -> None:
        """Write an entry with ``pwrite``, not through the mapping (which reads it back: one page cache).

        The preallocated index is sparse, as Kafka's is: the first write to each of its pages takes a page of
        the disk. Through the mapping, a full disk answers that with SIGBUS, which kills the broker (Kafka's
        JVM turns it into an error); ``pwrite`` gets ENOSPC, an OSError the partition handles as the log
        directory's failure, as it does a full segment file."""
        os.pwrite(self._fd, self.ENTRY.pack(first, second), slot * self.ENTRY.size)

    # -- resizing ------------------------------------------------------------------------------------------------

    def resize(self, new_size: int) -> bool:
        """Set the file (and mapping) size, keeping the valid entries; False if already that size."""
        rounded = _round_down(new_size, self.ENTRY.size)
        if rounded == self._length:
            return False
        if isinstance(self._mm, mmap.mmap):
            self._mm.close()
        self._mm = None
        os.ftruncate(self._fd, rounded)
        self._length = rounded
        self.max_entries = rounded // self.ENTRY.size
        self._mm = mmap.mmap(self._fd, rounded) if rounded else None
        self.entries = min(self.entries, rounded // self.ENTRY.size)
        return True

    def trim_to_valid_size(self) -> None:
        self.resize(self.entries * self.ENTRY.size)

    def reset(self) -> None:
        """Empty the index and make room for a full one again (recovery, truncation to an empty segment)."""
        self.truncate_to_entries(0)
        self.resize(self.max_index_size)

    def truncate_to_entries(self, entries: int) -> None:
        self.entries = entries
        self._load_last_entry()

    def flush(self) -> None:
        """fsync the file: on Linux this writes the mapping's dirty pages too, and unlike ``mmap.flush`` it
        stays valid while the append path re-maps the index (trim at roll) under the log's lock."""
        if self._fd >= 0:
            os.fsync(self._fd)

    def close(self) -> None:
        if isinstance(self._mm, mmap.mmap):
            self._mm.close()
        self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    # -- search ----------------------------------------------------------------------------------------------------

    def _largest_lower_bound_slot(self, target: int, field: int) -> int:
        """The last slot whose ``field`` (0 or 1 of the entry) is <= target, or -1: Kafka's indexSlotRangeFor,
        which searches the last 8 KiB of entries first (the ones the fetches of caught-up consumers want, kept
        warm in the page cache). On an ordered index any search finds the same slot; on a preallocated one
        read whole by the dump tool (zeroes after the entries) only this one lands where Kafka lands."""
        entries = self.entries
        if entries == 0:
            return -1
        key = self._key_of(target, field)
        unpack, size, mm = self.ENTRY.unpack_from, self.ENTRY.size, self._mm
        assert mm is not None  # entries > 0: the index is mapped (or read)
        first_hot = max(0, entries - 1 - _WARM_SECTION_BYTES // size)
        if unpack(mm, first_hot * size)[field] < key:
            lo, hi = first_hot, entries - 1
        elif unpack(mm, 0)[field] > key:
            return -1
        else:
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) // 2
            found = unpack(mm, mid * size)[field]
            if found > key:
                hi = mid - 1
            elif found < key:
                lo = mid
            else:
                return mid
        return lo

    def _key_of(self, target: int, field: int) -> int:
        raise NotImplementedError

    def _load_last_entry(self) -> None:
        raise NotImplementedError


class OffsetIndex(_Index):
    """``.index``: relative offset -> file position of the batch an append started at."""

    ENTRY = struct.Struct(">ii")

    def _load_last_entry(self) -> None:
        self.last_offset = self.base_offset + self.entry(self.entries - 1)[0] if self.entries else self.base_offset

    def _key_of(self, target: int, field: int) -> int:
        return target - self.base_offset if field == 0 else target

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= target, or (base offset, 0)."""
        slot = self._largest_lower_bound_slot(target_offset, 0)
        if slot < 0:
            return self.base_offset, 0
        relative, position = self.entry(slot)
        return self.base_offset + relative, position

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """Kafka's fetchUpperBoundOffset, which bounds the aborted transactions a fetch of the bytes before
        ``position`` answers: the offset of the first entry at or after ``position``, or None.

        As Kafka's: its binary search never compares the first slot with the target, so an entry exactly at
        ``position`` in the first slot yields the second one (and None when it is the only one).
        """
        slot = self._largest_lower_bound_slot(position, 1)
        if slot < 0:
            slot = 0
        elif slot == 0 or self.entry(slot)[1] < position:
            slot += 1
        return self.base_offset + self.entry(slot)[0] if slot < self.entries else None

    def append(self, offset: int, position: int) -> None:
        if self.is_full():
            raise InvalidOffsetError(f"Attempt to append to a full index (size = {self.entries}).")
        if self.entries and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to position {self.entries} no larger than the last offset "
                f"appended ({self.last_offset}) to {self.path}."
            )
        self._write_entry(self.entries, self.relative_offset(offset), position)
        self.entries += 1
        self.last_offset = offset

    def truncate_to(self, offset: int) -> None:
        """Remove every entry >= offset (Kafka's OffsetIndex.truncateTo)."""
        slot = self._largest_lower_bound_slot(offset, 0)
        if slot < 0:
            self.truncate_to_entries(0)
        elif self.entry(slot)[0] == offset - self.base_offset:
            self.truncate_to_entries(slot)
        else:
            self.truncate_to_entries(slot + 1)

    def sanity_check(self, log_size: int) -> None:
        """Kafka's checks plus ordering: offsets and positions strictly increasing, positions inside the log."""
        if self._length % self.ENTRY.size:
            raise CorruptIndexError(f"Index file {self.path} is corrupt, found {self._length} bytes which is neither positive nor a multiple of {self.ENTRY.size}.")
        if not self.entries:
            return
        assert self._mm is not None
        values = array("i", self._mm[: self.entries * self.ENTRY.size])
        if sys.byteorder == "little":
            values.byteswap()
        relatives, positions = values[0::2], values[1::2]
        if relatives[0] < 0 or positions[0] < 0 or positions[-1] >= max(log_size, 1):
            raise CorruptIndexError(f"Index file {self.path} points outside its segment")
        if any(a >= b for a, b in zip(relatives, relatives[1:])) or any(a >= b for a, b in zip(positions, positions[1:])):
            raise CorruptIndexError(f"Index file {self.path} is not strictly increasing")


class TimeIndex(_Index):
    """``.timeindex``: the max timestamp seen so far -> the offset where it was first reached."""

    ENTRY = struct.Struct(">qi")

    def _load_last_entry(self) -> None:
        if self.entries:
            timestamp, relative = self.entry(self.entries - 1)
            self.last_entry = (timestamp, self.base_offset + relative)
        else:
            self.last_entry = (NO_TIMESTAMP, self.base_offset)

    def _key_of(self, target: int, field: int) -> int:
        return target if field == 0 else target - self.base_offset

    def is_full(self) -> bool:
        """Kafka keeps the last slot for the entry written when the segment rolls."""
        return self.entries >= self.max_entries - 1

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target, or (-1, base offset)."""
        slot = self._largest_lower_bound_slot(target_timestamp, 0)
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        timestamp, relative = self.entry(slot)
        return timestamp, self.base_offset + relative

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append only if ``timestamp`` is larger than the last entry's (Kafka's TimeIndex.maybeAppend)."""
        if not skip_full_check and self.is_full():
            raise InvalidOffsetError(f"Attempt to append to a full time index (size = {self.entries}).")
        last_timestamp, last_offset = self.last_entry
        if self.entries and offset < last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {self.entries} no larger than the last offset "
                f"appended ({last_offset}) to {self.path}."
            )
        if self.entries and timestamp < last_timestamp:
            raise InvalidOffsetError(
                f"Attempt to append a timestamp ({timestamp}) to slot {self.entries} no larger than the last "
                f"timestamp appended ({last_timestamp}) to {self.path}."
            )
        if timestamp > last_timestamp:
            if self.entries >= self.max_entries:
                self.resize((self.entries + 1) * self.ENTRY.size)  # a trimmed index taking its closing entry
            self._write_entry(self.entries, timestamp, self.relative_offset(offset))
            self.entries += 1
            self.last_entry = (timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= offset."""
        slot = self._largest_lower_bound_slot(offset, 1)
        if slot < 0:
            self.truncate_to_entries(0)
        elif self.entry(slot)[1] == offset - self.base_offset:
            self.truncate_to_entries(slot)
        else:
            self.truncate_to_entries(slot + 1)

    def sanity_check(self, log_size: int) -> None:
        if self._length % self.ENTRY.size:
            raise CorruptIndexError(f"Time index file {self.path} is corrupt, found {self._length} bytes which is neither positive nor a multiple of {self.ENTRY.size}.")
        if not self.entries:
            return
        assert self._mm is not None
        entries = list(self.ENTRY.iter_unpack(self._mm[: self.entries * self.ENTRY.size]))
        timestamps = [e[0] for e in entries]
        relatives = [e[1] for e in entries]
        if relatives[0] < 0 or any(a >= b for a, b in zip(timestamps, timestamps[1:])) or any(a > b for a, b in zip(relatives, relatives[1:])):
            raise CorruptIndexError(f"Time index file {self.path} is not ordered")


def _round_down(number: int, factor: int) -> int:
    return number // factor * factor
