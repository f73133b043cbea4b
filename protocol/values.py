"""Record classes, and the enumerations of codes, whose machinery is written once here instead of generated
at every import.

Python 3.11's ``@dataclass`` writes each method it adds (``__init__``, ``__repr__``, ``__eq__``, and for a frozen
class ``__hash__``, ``__setattr__``, ``__delattr__``) as source and compiles it when the module is imported:
about 2 M instructions a class, 3-4 M a frozen or slotted one, paid by every start (docs/performance.md,
"Start-up"). A class deriving from :class:`Fields` names its fields in ``_FIELDS``, in order, and writes its
own ``__init__``; it is equal, shown and (frozen) hashed as the dataclass was.

``typing.NamedTuple`` compiles each string annotation into a ``ForwardRef`` and ``namedtuple`` evaluates the source of
each class's ``__new__``: ~1.3 M instructions a class of four fields. A class deriving from :class:`TupleFields` is
the same tuple, built in a tenth of that.

The standard library's ``EnumType`` builds each member of an ``IntEnum`` through several layers of checks and
descriptors, ~70 K instructions a member; the error codes, API keys and ACL codes alone are ~300 members a
start builds. :class:`CodeEnum` builds the same members in a fraction of that (see its docstring).
"""
from __future__ import annotations

from array import array
from functools import cache
from types import FunctionType, MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Iterator, TypeVar

try:
    from odradek.protocol import _codec  # a TupleFields class's __new__ in C (FieldsNew), when built
except ImportError:
    _codec = None  # type: ignore[assignment]

try:
    from _collections import _tuplegetter  # type: ignore[import-not-found]  # the C descriptor namedtuple gives each field
except ImportError:  # as collections falls back on another implementation
    from operator import itemgetter

    def _tuplegetter(index: int, doc: str | None) -> Any:
        return property(itemgetter(index), doc=doc)


_T = TypeVar("_T")


class Fields:
    """Equal to another instance of the same class whose fields are equal, and shown with its fields, as a
    dataclass; mutable, so unhashable (a dataclass's ``eq=True`` without ``frozen``)."""

    __slots__ = ()
    _FIELDS: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._FIELDS])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Fields)
        return self._values() == other._values()

    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{name}={getattr(self, name)!r}' for name in self._FIELDS)})"


_PLAIN_FIELDS = 16
"""The most parameters a :func:`plain_init` ``__init__`` may have (the extension's ``MAX_PLAIN_SLOTS``)."""
_NOP = array("H", bytes((9, 0)))[0]
"""A ``NOP`` (opcode 9, ``opcode.opmap``; its argument is always 0) as one 2-byte unit of bytecode: what an
attribute's docstring after its assignment compiles to."""


# An ``__init__`` setting each of _PLAIN_FIELDS parameters to the attribute of the same name, in order, whose
# bytecode plain_init compares a class's with (no docstring: its first constant must be None, as theirs). Written
# out rather than compiled at the first class: ``compile`` cost ~0.9 M instructions every start
# (docs/performance.md, "Start-up").
def _plain_template(self: Any, a0: Any, a1: Any, a2: Any, a3: Any, a4: Any, a5: Any, a6: Any, a7: Any, a8: Any, a9: Any, a10: Any, a11: Any, a12: Any, a13: Any, a14: Any, a15: Any) -> None:
    self.a0 = a0
    self.a1 = a1
    self.a2 = a2
    self.a3 = a3
    self.a4 = a4
    self.a5 = a5
    self.a6 = a6
    self.a7 = a7
    self.a8 = a8
    self.a9 = a9
    self.a10 = a10
    self.a11 = a11
    self.a12 = a12
    self.a13 = a13
    self.a14 = a14
    self.a15 = a15


def plain_init(cls: type[_T]) -> type[_T]:
    """A class decorator: calling ``cls`` fills its slots in C (the extension's ``slots_init``, when built), without
    running its ``__init__``, which must only set each of its parameters to the slot of the same name, in order
    (its bytecode is checked against one that does, attribute docstrings aside: anything more is a TypeError
    here, at import). What a Python ``__init__`` costs is mostly the call around it (``type_call``, the lookup
    of ``__init__``, an argument tuple, a frame): ~1.5-2.5k instructions an object, and a small produce or
    fetch makes half a dozen such objects of its own (docs/performance.md, the per-request floor's eighth
    round). Without the extension, the ``__init__`` runs as written."""
    init = cls.__dict__["__init__"]
    code = init.__code__
    names = code.co_varnames[1 : code.co_argcount]
    plain = _plain_template.__code__.co_code
    size = (len(plain) - 6) // _PLAIN_FIELDS  # RESUME, a block per field, then LOAD_CONST None and RETURN_VALUE
    units = array("H", code.co_code)  # the instructions, NOPs removed in C (a generator over them ran ~650 steps a start)
    while _NOP in units:
        units.remove(_NOP)
    if (
        len(names) > _PLAIN_FIELDS or code.co_flags & 0x0C or code.co_kwonlyargcount or code.co_posonlyargcount or code.co_names != names
        or code.co_consts[:1] != (None,) or units.tobytes() != plain[: 2 + size * len(names)] + plain[-4:]
    ):
        raise TypeError(f"{cls.__qualname__}.__init__ does more than set its parameters to the slots of their names")
    if _codec is not None:
        _codec.slots_init(cls, names, init.__defaults__ or ())
    return cls


class FrozenFields(Fields):
    """Immutable and hashed by its fields (``@dataclass(frozen=True)``): ``__init__`` sets them with
    :meth:`_set`."""

    __slots__ = ()

    def _set(self, *values: Any) -> None:
        """Set the fields, in ``_FIELDS`` order: what an ``__init__`` does once it has its values."""
        for name, value in zip(self._FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")


class _CodeEnumType(type):
    """Builds a :class:`CodeEnum`'s members once, as its class statement ends."""

    _member_map_: dict[str, Any]
    _value2member_map_: dict[int, Any]
    _members: tuple[Any, ...]

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> _CodeEnumType:
        body: dict[str, Any] = {}
        members: dict[str, Any] = {}
        for key, value in namespace.items():
            # As EnumType: every public name whose value is no descriptor (function, property, classmethod) is a member.
            if key[0] == "_" or hasattr(value, "__get__"):
                body[key] = value
            else:
                members[key] = value
        cls = super().__new__(mcs, name, bases, body)
        by_name: dict[str, Any] = {}
        by_value: dict[int, Any] = {}
        new: Any = cls.__new__  # int's, or the class's own (ErrorCode's)
        for key, value in members.items():
            code = value[0] if value.__class__ is tuple else value
            canonical = by_value.get(code)
            if canonical is None:  # a second name for a code is an alias of the first, as in Enum
                canonical = new(cls, *value) if value.__class__ is tuple else new(cls, value)
                canonical.name = key
                canonical.value = code
                by_value[code] = canonical
            by_name[key] = canonical
        # Only once every member is made: setting a class attribute invalidates the class's attribute cache,
        # and each member's attributes set after that looked their names up through the classes again.
        for key, canonical in by_name.items():
            setattr(cls, key, canonical)
        cls._member_map_ = by_name
        cls._value2member_map_ = by_value
        cls._members = tuple(by_value.values())
        return cls

    def __call__(cls, value: int) -> Any:
        """The member of this value (``ErrorCode(5)``), or ValueError."""
        try:
            return cls._value2member_map_[value]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not a valid {cls.__qualname__}") from None

    def __getitem__(cls, name: str) -> Any:
        return cls._member_map_[name]

    def __iter__(cls) -> Iterator[Any]:
        return iter(cls._members)

    def __reversed__(cls) -> Iterator[Any]:
        return iter(cls._members[::-1])

    def __len__(cls) -> int:
        return len(cls._members)

    def __bool__(cls) -> bool:
        return True

    def __contains__(cls, value: object) -> bool:
        """A member, or a member's value (Python 3.12's ``Enum``: 3.11's raises TypeError for a plain int)."""
        return value in cls._value2member_map_

    @property
    def __members__(cls) -> MappingProxyType[str, Any]:
        """Every name, aliases included, to its member."""
        return MappingProxyType(cls._member_map_)


class _CodeEnum(int, metaclass=_CodeEnumType):
    """An ``IntEnum`` whose members are built without ``EnumType``: a class statement of ``NAME = code`` lines (or
    ``NAME = code, more...`` when the class defines ``__new__(cls, code, more...)``), members that are ints with
    ``name`` and ``value``, shown as ``<Class.NAME: code>``, printed and formatted as their code, compared and
    hashed as it, pickled and copied as themselves. The class gives the member of a code (``Class(code)``,
    ValueError for any other), of a name (``Class["NAME"]``), its members in order (aliases, a second name for a
    code, only by name), ``len``, ``in`` and ``__members__``.

    Built in ~1/4 of ``EnumType``'s instructions (~17 K a member against ~70 K, measured with ``ErrorCode``),
    and ``name``/``value`` are plain attributes where ``Enum`` reads them through a Python descriptor. What
    ``Enum`` offers beyond that (``auto()``, ``_missing_``, flags, ``isinstance(x, enum.Enum)``) it does not;
    a type checker is told it is ``enum.IntEnum`` (below), so it checks its uses as an enum's.
    """

    name: str
    value: int

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__}.{self.name}: {int(self)}>"

    __str__ = int.__repr__

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, tuple[int]]:
        return self.__class__, (int(self),)

    def __copy__(self) -> _CodeEnum:
        return self

    def __deepcopy__(self, memo: Any) -> _CodeEnum:
        return self


_tuple_new = tuple.__new__


@cache
def _new_of(arity: int) -> FunctionType:
    """A tuple class's ``__new__`` taking ``arity`` fields, compiled once per arity (namedtuple compiles one per
    class): each class gets a copy with its fields' names (its keywords) and defaults. Used where the schema
    machine's extension is not built; with it, the class's ``__new__`` is its ``FieldsNew`` (a tuple made in
    a little over half this one's instructions)."""
    args = "".join(f"a{index}, " for index in range(arity))
    namespace: dict[str, Any] = {}
    exec(compile(f"def __new__(_cls, {args}): return _tuple_new(_cls, ({args}))", "<TupleFields>", "exec"), {"_tuple_new": _tuple_new}, namespace)
    new: FunctionType = namespace["__new__"]
    return new


class _TupleFieldsType(type):
    """Makes a :class:`TupleFields` class's fields, from its annotations, as its class statement ends."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> _TupleFieldsType:
        namespace["__slots__"] = ()
        fields = tuple(namespace.get("__annotations__", ()))
        if fields:  # a subclass of a tuple class without annotations of its own keeps its fields
            defaults = {field: namespace.pop(field) for field in fields if field in namespace}
            if tuple(defaults) != fields[len(fields) - len(defaults):]:
                raise TypeError(f"{name}: a field without a default follows one with a default")
            if _codec is not None:
                namespace["__new__"] = _codec.FieldsNew(fields, tuple(defaults.values()))
            else:
                template = _new_of(len(fields))
                code = template.__code__.replace(co_varnames=("_cls", *fields), co_qualname=f"{name}.__new__")
                namespace["__new__"] = FunctionType(code, template.__globals__, "__new__", tuple(defaults.values()) or None)
            namespace["_fields"] = namespace["__match_args__"] = fields
            namespace["_field_defaults"] = defaults
            for index, field in enumerate(fields):
                namespace[field] = _tuplegetter(index, f"Alias for field number {index}")
        return super().__new__(mcs, name, bases, namespace)


class _TupleFields(tuple[Any, ...], metaclass=_TupleFieldsType):
    """A ``typing.NamedTuple`` built without evaluating source per class: a class statement of annotated fields
    (those with a value are defaults, after the others), giving a tuple with those fields as attributes,
    ``_fields``, ``_field_defaults``, ``_make``, ``_replace``, ``_asdict``, and a namedtuple's ``repr``. Its
    ``__new__`` is a namedtuple's (one compiled per number of fields, renamed per class), its fields are read
    by the same C descriptor. A type checker is told it is ``typing.NamedTuple`` (below)."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _field_defaults: ClassVar[dict[str, Any]] = {}

    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> Any:
        made = _tuple_new(cls, iterable)
        if len(made) != len(cls._fields):
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(made)}")
        return made

    def _replace(self, **changes: Any) -> Any:
        made = self._make([changes.pop(name, value) for name, value in zip(self._fields, self)])
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return made

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(self._fields, self))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({', '.join(f'{name}={value!r}' for name, value in zip(self._fields, self))})"

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)


if TYPE_CHECKING:
    from enum import IntEnum as CodeEnum
    from typing import NamedTuple as TupleFields
else:
    CodeEnum = _CodeEnum
    TupleFields = _TupleFields

__all__ = ["CodeEnum", "Fields", "FrozenFields", "TupleFields"]
