"""Kafka's ConfigDef vocabulary, shared by the broker's and the topics' config tables.

Values are parsed from the strings of ``server.properties`` and admin requests, and rendered back as the
strings DescribeConfigs returns (``true``/``false``, comma-joined lists, ``null`` as absent).
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.values import CodeEnum, plain_init


class ConfigError(ValueError):
    """A configuration value Kafka would reject (the broker answers INVALID_CONFIG or refuses to start)."""


class InvalidValueError(ConfigError):
    """One key's value rejected by its type or validator (Kafka's ``ConfigException``, as opposed to checks
    across keys): AlterConfigs answers name the resource before it."""


ConfigValue = bool | int | float | str | list[str] | None
"""A parsed config value: BOOLEAN a bool, INT, SHORT and LONG an int, DOUBLE a float, LIST its items, the others
(STRING, CLASS, PASSWORD) a string; None when unset."""


class ConfigType(CodeEnum):
    """Numbered as DescribeConfigs v3+ reports ``ConfigType``."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


_INT_RANGES = {
    ConfigType.INT: (-(2**31), 2**31 - 1),
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.LONG: (-(2**63), 2**63 - 1),
}


def _java_integer(text: str) -> bool:
    """Java's Integer/Long.parseX syntax: an optional sign, then ASCII digits (string tests: a regular
    expression compiled at import cost every start 0.3 M instructions)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    return digits.isascii() and digits.isdigit()


@plain_init  # ~250 keys made by every start (the broker's and the topics' tables): their slots filled in C
class ConfigKey:
    __slots__ = ("name", "type", "default", "doc", "at_least", "valid", "acted_on")

    def __init__(
        self,
        name: str,
        type: ConfigType,
        default: Any,
        doc: str,
        at_least: float | None = None,
        valid: tuple[str, ...] | None = None,
        acted_on: bool = True,
    ) -> None:
        self.name = name
        self.type = type
        self.default = default
        self.doc = doc
        self.at_least = at_least
        self.valid = valid
        self.acted_on = acted_on
        """False for keys accepted for compatibility whose behaviour odradek does not implement."""

    def parse(self, raw: Any) -> Any:
        """A value from its string form (or an already-typed value), validated as Kafka's ConfigDef does."""
        if raw is None:
            return None
        t = self.type
        text = raw.strip() if isinstance(raw, str) else raw
        try:
            if t is ConfigType.BOOLEAN:
                if isinstance(text, bool):
                    value: Any = text
                elif str(text).lower() in ("true", "false"):
                    value = str(text).lower() == "true"
                else:
                    raise ValueError("Expected value to be either true or false")
            elif t in _INT_RANGES:
                # Java's Integer/Short/Long.parseX: an optional sign and digits within the type's range.
                lo, hi = _INT_RANGES[t]
                if isinstance(text, str) and not _java_integer(text):
                    raise ValueError(f"Not a number of type {t.name}")
                value = int(text)
                if not lo <= value <= hi:
                    raise ValueError(f"Not a number of type {t.name}")
            elif t is ConfigType.DOUBLE:
                try:
                    value = float(text)
                except ValueError:
                    raise ValueError(f"Not a number of type {t.name}") from None
            elif t is ConfigType.LIST:
                value = [p.strip() for p in text.split(",") if p.strip()] if isinstance(text, str) else list(text)
            else:
                value = str(text)
        except ValueError as exc:
            raise InvalidValueError(f"Invalid value {raw} for configuration {self.name}: {exc}") from None
        self.validate(value)
        return value

    def validate(self, value: Any) -> None:
        if value is None:
            return
        if self.at_least is not None and value < self.at_least:
            raise InvalidValueError(f"Invalid value {value} for configuration {self.name}: Value must be at least {self.at_least:g}")
        if self.valid is not None:
            items = value if isinstance(value, list) else [value]
            for item in items:
                if item not in self.valid:
                    raise InvalidValueError(f"Invalid value {item} for configuration {self.name}: String must be one of: {', '.join(self.valid)}")

    def render(self, value: Any) -> str | None:
        """The string DescribeConfigs reports for a value."""
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return ",".join(str(v) for v in value)
        if isinstance(value, float) and self.type is ConfigType.DOUBLE:
            return repr(value)
        return str(value)
