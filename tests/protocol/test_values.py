"""The value bases of protocol/values.py behave as what they replace wherever the broker, tools and tests use
one: ``CodeEnum`` as ``enum.IntEnum`` (the same members, names, values, look-ups, text and equality, built
without ``EnumType``), ``TupleFields`` as ``typing.NamedTuple`` (the same tuple, fields, defaults, keywords,
methods and text, built without evaluating source per class), and a ``plain_init`` class as its own ``__init__``
(the same slots from the same calls, and the same refusals)."""

from __future__ import annotations

import copy
import enum
import importlib
import pickle
from typing import Any, NamedTuple

import pytest

from odradek.broker.authorizer.acl import AclOperation
from odradek.protocol.api import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.values import CodeEnum, Fields, TupleFields, _codec, plain_init


class Colour(CodeEnum):
    RED = 1
    GREEN = 2
    CRIMSON = 1  # an alias of RED
    NEGATIVE = -3

    @property
    def lower(self) -> str:
        return self.name.lower()

    @classmethod
    def default(cls) -> Colour:
        return cls.GREEN

    def doubled(self) -> int:
        return 2 * self


class StdColour(enum.IntEnum):
    RED = 1
    GREEN = 2
    CRIMSON = 1
    NEGATIVE = -3


def test_members_and_lookups_are_an_int_enums() -> None:
    assert list(Colour) == [Colour.RED, Colour.GREEN, Colour.NEGATIVE]
    assert [m.name for m in Colour] == [m.name for m in StdColour]
    assert [m.value for m in Colour] == [m.value for m in StdColour]
    assert list(reversed(Colour)) == list(reversed(list(Colour)))
    assert len(Colour) == len(StdColour) == 3
    assert Colour.CRIMSON is Colour.RED and Colour.CRIMSON.name == "RED"
    assert dict(Colour.__members__) == {"RED": Colour.RED, "GREEN": Colour.GREEN, "CRIMSON": Colour.RED, "NEGATIVE": Colour.NEGATIVE}
    assert Colour(2) is Colour.GREEN and Colour(Colour.GREEN) is Colour.GREEN and Colour["CRIMSON"] is Colour.RED
    with pytest.raises(ValueError, match="7 is not a valid Colour"):
        Colour(7)
    with pytest.raises(ValueError):
        Colour([1])  # type: ignore[arg-type]  # unhashable: ValueError, as Enum's
    with pytest.raises(KeyError):
        Colour["BLUE"]
    assert Colour.RED in Colour and 2 in Colour and 7 not in Colour
    assert bool(Colour) and bool(CodeEnum)


def test_members_are_ints_shown_as_an_int_enums() -> None:
    for ours, theirs in zip(Colour, StdColour):
        assert isinstance(ours, Colour) and isinstance(ours, int)
        assert ours == theirs == int(theirs) and hash(ours) == hash(int(theirs))
        assert repr(ours) == repr(theirs).replace("StdColour", "Colour") and str(ours) == str(theirs) and f"{ours}" == f"{theirs}" and f"{ours:>4}" == f"{theirs:>4}"
        assert "%s %d" % (ours, ours) == "%s %d" % (theirs, theirs)
    assert Colour.RED < Colour.GREEN and Colour.NEGATIVE < 0 and {1: "one"}[Colour.RED] == "one"
    assert Colour.GREEN + 1 == 3 and type(Colour.GREEN + 1) is int


def test_methods_properties_and_classmethods_are_not_members() -> None:
    assert Colour.RED.lower == "red" and Colour.default() is Colour.GREEN and Colour.GREEN.doubled() == 4
    assert "lower" not in Colour.__members__ and "default" not in Colour.__members__


def test_pickled_and_copied_members_are_the_members() -> None:
    for member in (Colour.NEGATIVE, ErrorCode.NOT_LEADER_OR_FOLLOWER, ApiKey.Fetch, AclOperation.DESCRIBE):
        assert pickle.loads(pickle.dumps(member)) is member
        assert copy.copy(member) is member and copy.deepcopy([member])[0] is member


def test_a_class_with_its_own_new_gives_each_member_its_fields() -> None:
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.value == 6 and ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert ErrorCode(3).message == "This server does not host this topic-partition."
    assert ErrorCode.for_code(9999) is ErrorCode.UNKNOWN_SERVER_ERROR and ErrorCode.for_code(-1) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert repr(ErrorCode.NONE) == "<ErrorCode.NONE: 0>" and not ErrorCode.NONE  # 0 is false, as an IntEnum member


class Ended(TupleFields):
    """A docstring, and a method: neither is a field."""

    reason: str
    answer: bytes | None = None
    delay_s: float = 0.0

    def delayed(self) -> bool:
        return self.delay_s > 0


class StdEnded(NamedTuple):
    reason: str
    answer: bytes | None = None
    delay_s: float = 0.0


def test_a_tuple_class_is_a_named_tuples() -> None:
    for ours, theirs in ((Ended("x"), StdEnded("x")), (Ended("x", b"a", delay_s=1.5), StdEnded("x", b"a", delay_s=1.5)), (Ended(reason="y", answer=None), StdEnded(reason="y", answer=None))):
        assert ours == theirs and tuple(ours) == tuple(theirs) and hash(ours) == hash(theirs) and isinstance(ours, tuple)
        assert repr(ours) == repr(theirs).replace("StdEnded", "Ended")
        assert (ours.reason, ours.answer, ours.delay_s) == (theirs.reason, theirs.answer, theirs.delay_s) == tuple(ours)
        reason, answer, delay_s = ours
        assert ours[0] == reason and ours[-1] == delay_s
        assert ours._asdict() == theirs._asdict()
        assert ours._replace(delay_s=2.0) == theirs._replace(delay_s=2.0) and type(ours._replace(delay_s=2.0)) is Ended
        assert pickle.loads(pickle.dumps(ours)) == ours and copy.deepcopy(ours) == ours and type(copy.copy(ours)) is Ended
    assert Ended._fields == StdEnded._fields == ("reason", "answer", "delay_s") == Ended.__match_args__
    assert Ended._field_defaults == StdEnded._field_defaults
    assert Ended._make(["z", None, 0.5]) == Ended("z", None, 0.5) and Ended("a", delay_s=1).delayed()
    with pytest.raises(AttributeError):
        Ended("x").reason = "y"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        Ended("x").extra = 1  # type: ignore[attr-defined]  # no __dict__, as a namedtuple
    with pytest.raises(TypeError):
        Ended()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Ended("x", bogus=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        Ended("x")._replace(bogus=1)
    with pytest.raises(TypeError):
        Ended._make(["only one"])


def test_a_tuple_class_refuses_the_calls_a_named_tuple_refuses() -> None:
    """Missing, repeated, unknown and surplus arguments: a TypeError from both, whichever ``__new__`` the class
    has (the schema machine's ``FieldsNew`` when the extension is built)."""
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((), {}), ((), {"answer": b"a"}), (("x",), {"reason": "y"}), (("x",), {"bogus": 1}), (("x", b"a", 1.0, 2), {}),
    ]
    for args, kwargs in calls:
        for cls in (Ended, StdEnded):
            with pytest.raises(TypeError):
                cls(*args, **kwargs)
    assert Ended("x", delay_s=2.0, answer=b"a") == StdEnded("x", delay_s=2.0, answer=b"a")
    assert Ended.__new__(Ended, "x") == Ended("x") and type(Ended.__new__(Ended, "x")) is Ended


def test_a_field_without_a_default_after_one_with_is_refused() -> None:
    with pytest.raises(TypeError, match="follows one with a default"):

        class Wrong(TupleFields):  # type: ignore[misc]
            first: int = 0
            second: int


def _read_class() -> Any:
    class Read(Fields):
        __slots__ = _FIELDS = ("offset", "slice", "size")

        def __init__(self, offset: int, slice: Any, size: int = -1) -> None:
            self.offset = offset
            """An attribute's docstring (a NOP in the bytecode) is allowed."""
            self.slice = slice
            self.size = size

    return Read


Read, PlainRead = _read_class(), plain_init(_read_class())


def test_a_plain_init_class_is_made_as_its_init_makes_it() -> None:
    """The same slots from the same calls, and a TypeError where its ``__init__`` refuses the call (missing,
    repeated, unknown and surplus arguments); a subclass is made by the ``__init__`` it inherits."""
    assert _codec is None or "_plain_init" in vars(PlainRead)  # the extension's call, when built (`make install`)
    made = [((1, b"s"), {}), ((1, b"s", 7), {}), ((1,), {"slice": b"s"}), ((), {"size": 3, "slice": None, "offset": 2}), ((1,), {"slice": b"s", "size": 4})]
    for args, kwargs in made:
        plain, read = PlainRead(*args, **kwargs), Read(*args, **kwargs)
        assert type(plain) is PlainRead and plain._values() == read._values()
    refused = [((), {}), ((1,), {}), ((1, b"s"), {"offset": 1}), ((1, b"s"), {"bogus": 1}), ((1, b"s", 7, 8), {}), ((1, b"s", 7), {"size": 7})]
    for args, kwargs in refused:
        for cls in (PlainRead, Read):
            with pytest.raises(TypeError):
                cls(*args, **kwargs)

    class Sub(PlainRead):  # type: ignore[valid-type, misc]
        __slots__ = ("extra",)

    assert Sub(1, b"s")._values() == (1, b"s", -1) and not hasattr(Sub(1, b"s"), "extra")


def test_plain_init_refuses_an_init_that_does_more() -> None:
    class Computed(Fields):
        __slots__ = ("offset", "size")

        def __init__(self, offset: int, size: int) -> None:
            self.offset = offset
            self.size = size + 1

    class Reordered(Fields):
        __slots__ = ("offset", "size")

        def __init__(self, offset: int, size: int) -> None:
            self.size = size
            self.offset = offset

    class Renamed(Fields):
        __slots__ = ("offset", "size")

        def __init__(self, offset: int, length: int) -> None:
            self.offset = offset
            self.size = length

    class ByKeyword(Fields):
        __slots__ = ("offset", "size")

        def __init__(self, offset: int, *, size: int) -> None:
            self.offset = offset
            self.size = size

    for cls in (Computed, Reordered, Renamed, ByKeyword):
        with pytest.raises(TypeError, match="does more than set its parameters"):
            plain_init(cls)


PLAIN_MODULES = (
    "odradek.protocol.api", "odradek.protocol.record_walk", "odradek.protocol.record_batch", "odradek.storage.log_validator", "odradek.storage.log",
    "odradek.storage.segment", "odradek.storage.file_records", "odradek.broker.replication.partition", "odradek.broker.replication.replica_manager",
    "odradek.broker.replication.fetch_session",
)


@pytest.mark.skipif(_codec is None, reason="protocol/_codec.c not built")  # `make install` builds it
def test_every_plain_init_class_fills_each_slot_from_its_argument() -> None:
    """Each class of the broker made by ``slots_init``: every slot holds the argument of its name (none is
    filled from another's), and each default is its ``__init__``'s."""
    classes = [c for m in PLAIN_MODULES for c in vars(importlib.import_module(m)).values() if isinstance(c, type) and "_plain_init" in vars(c)]
    assert {c.__name__ for c in classes} >= {"Request", "AppendInfo", "FetchParams", "PartitionResponse", "FileSlice", "OffsetPosition"}
    for cls in classes:
        code = cls.__init__.__code__
        names = code.co_varnames[1 : code.co_argcount]
        given = {name: object() for name in names}
        made = cls(**given)
        assert all(getattr(made, name) is value for name, value in given.items()), cls
        defaults = cls.__init__.__defaults__ or ()
        required = names[: len(names) - len(defaults)]
        made = cls(*(given[name] for name in required))
        assert [getattr(made, name) for name in names] == [given[name] for name in required] + list(defaults), cls
