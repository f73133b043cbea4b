"""Record classes whose dataclass methods are written once here instead of generated at every import.

Python 3.11's ``@dataclass`` writes each method it adds (``__init__``, ``__repr__``, ``__eq__``, and for a frozen
class ``__hash__``, ``__setattr__``, ``__delattr__``) as source and compiles it when the module is imported:
about 2 M instructions a class, 3-4 M a frozen or slotted one, paid by every start (docs/performance.md,
"Start-up"). A class deriving from :class:`Fields` names its fields in ``_FIELDS``, in order, and writes its
own ``__init__``; it is equal, shown and (frozen) hashed as the dataclass was.
"""

from __future__ import annotations

from typing import Any, ClassVar


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
