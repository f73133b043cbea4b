"""Kafka's ``Uuid``: the 128-bit ids of topics, log directories and clusters (the protocol's ``uuid`` type).

Our own rather than the standard library's ``uuid.UUID``, whose module imports ``platform`` (which compiles
about ten regular expressions) to decide how to find a MAC address that topic ids never use: ~10 M
instructions of every broker's start and first CreateTopics (docs/performance.md, "Start-up"). What the
broker uses of ``uuid.UUID`` is here under the same names: ``Uuid(text)``, ``Uuid(bytes=...)``,
``Uuid(int=...)``, ``.bytes``, ``.int``, ``.hex``, ``str()`` (the 8-4-4-4-12 hexadecimal form, as the
controller's state file and the logs have it), equality, hashing and order by value; a ``Uuid`` is equal to
a ``uuid.UUID`` of the same value (and hashed alike), so either finds the other in a dict.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_int = int
_bytes = bytes


class Uuid:
    """A 128-bit id, immutable and compared by value (``uuid.UUID``'s interface, above)."""

    __slots__ = ("int",)
    int: _int

    def __init__(self, hex: str | None = None, *, bytes: _bytes | None = None, int: _int | None = None) -> None:
        if bytes is not None:
            if len(bytes) != 16:
                raise ValueError("bytes is not a 16-char string")
            value = _int.from_bytes(bytes, "big")
        elif int is not None:
            if not 0 <= int < 1 << 128:
                raise ValueError("int is out of range (need a 128-bit value)")
            value = int
        elif hex is not None:
            digits = hex.replace("urn:", "").replace("uuid:", "").strip("{}").replace("-", "")
            if len(digits) != 32:
                raise ValueError("badly formed hexadecimal UUID string")
            value = _int(digits, 16)
        else:
            raise TypeError("one of the hex, bytes or int arguments must be given")
        _set_int(self, value)

    @property
    def bytes(self) -> _bytes:
        return self.int.to_bytes(16, "big")

    @property
    def hex(self) -> str:
        return f"{self.int:032x}"

    def __str__(self) -> str:
        text = f"{self.int:032x}"
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"

    def __repr__(self) -> str:
        return f"Uuid('{self}')"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Uuid):
            return self.int == other.int
        standard = sys.modules.get("uuid")  # equal to the standard library's uuid.UUID of the same value (tools, tests)
        if standard is not None and isinstance(other, standard.UUID):
            return bool(self.int == other.int)
        return NotImplemented

    def __lt__(self, other: Uuid) -> bool:
        return self.int < other.int if isinstance(other, Uuid) else NotImplemented

    def __le__(self, other: Uuid) -> bool:
        return self.int <= other.int if isinstance(other, Uuid) else NotImplemented

    def __gt__(self, other: Uuid) -> bool:
        return self.int > other.int if isinstance(other, Uuid) else NotImplemented

    def __ge__(self, other: Uuid) -> bool:
        return self.int >= other.int if isinstance(other, Uuid) else NotImplemented

    def __hash__(self) -> _int:
        return hash(self.int)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError("Uuid objects are immutable")

    def __reduce__(self) -> tuple[Any, tuple[_int]]:
        return _of_int, (self.int,)

    def __copy__(self) -> Uuid:
        return self

    def __deepcopy__(self, memo: Any) -> Uuid:
        return self


_set_int = Uuid.__dict__["int"].__set__  # the slot's own setter: Uuid's __setattr__ refuses every change


def _of_int(value: _int) -> Uuid:
    made = object.__new__(Uuid)
    _set_int(made, value)
    return made


def uuid_of_bytes(data: _bytes) -> Uuid:
    """``Uuid(bytes=data)`` without its checks, for the codec (which always reads 16 bytes)."""
    return _of_int(_int.from_bytes(data, "big"))


ZERO_UUID = Uuid(int=0)
"""Kafka's ``Uuid.ZERO_UUID``: no topic id (a request naming its topics by name, a topic without one)."""


_DASH_FIRST = 0b111110 << 122
"""The 6 leading bits that make a base64url text start with "-" (character 62)."""


def random_uuid() -> Uuid:
    """A random (version 4, RFC 4122 variant) id, as Kafka's ``Uuid.randomUuid`` makes one: never a reserved id
    (zero, one), never one whose text (base64url, how tools print and take topic and cluster ids) starts with
    "-", which a command line would read as an option."""
    while True:
        value = _int.from_bytes(os.urandom(16), "big")
        value = (value & ~(0xF000 << 64) & ~(0xC000 << 48)) | (0x4000 << 64) | (0x8000 << 48)
        if value > 1 and value >> 122 != _DASH_FIRST >> 122:
            return _of_int(value)
