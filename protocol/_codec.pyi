"""Types of the C extension protocol/_codec.c (the schema machine), for mypy (which cannot read a compiled module)."""

from typing import Any

from typing_extensions import Buffer

def configure(
    decode_error: type[Exception],
    encode_error: type[Exception],
    container: type[dict[str, Any]],
    copy_default: Any,
    uuid_of_bytes: Any,
    uuid_bytes: Any,
    splice: type,
    /,
) -> None:
    """The Python objects the machine makes and raises (set once, by protocol/schema.py)."""

def decode(programs: tuple[Any, ...], view: Buffer, offset: int, /) -> tuple[list[Any], int]:
    """The structs of ``programs`` read one after the other from ``view[offset:]``, and the end offset."""

def encode(parts: tuple[tuple[Any, Any], ...], framed: bool, /) -> tuple[bytes, list[Any]]:
    """The ``(program, value)`` parts written in order (after a 4-byte size if ``framed``), and the splices."""
