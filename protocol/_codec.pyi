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

def encode(programs: tuple[Any, ...], parts: tuple[tuple[Any, int, Any], ...], framed: bool, /) -> tuple[bytes, list[Any]]:
    """The values of the ``(message, version, value)`` parts written in order by their programs (after a
    4-byte size if ``framed``), and the splices."""

def template(names: tuple[str, ...], values: tuple[Any, ...], /) -> dict[str, Any]:
    """A dict of these keys and values, sized for them at once."""

class Field:
    """A decoded struct's field as an attribute of its Container class: its key read, set and deleted."""

    name: str

    def __init__(self, name: str, /) -> None: ...
    def __get__(self, obj: Any, owner: Any = None, /) -> Any: ...
    def __set__(self, obj: Any, value: Any, /) -> None: ...
    def __delete__(self, obj: Any, /) -> None: ...

class FieldsNew:
    """A ``TupleFields`` class's ``__new__``: the tuple of its ``fields``, the last ``len(defaults)`` with defaults."""

    def __init__(self, fields: tuple[str, ...], defaults: tuple[Any, ...], /) -> None: ...
    def __call__(self, cls: type[tuple[Any, ...]], /, *values: Any, **by_name: Any) -> Any: ...

def slots_init(cls: type, names: tuple[str, ...], defaults: tuple[Any, ...], /) -> None:
    """Calling ``cls`` fills the slots ``names`` (the last ``len(defaults)`` with defaults) in C, running no
    ``__init__``: for a class whose ``__init__`` does only that (``values.plain_init`` checks)."""
