"""The parsed form of rule filters and actions: immutable nodes, and the value kinds they carry.

Values have one of eight kinds, named by one letter (the same letters tag values inside Spark,
see :mod:`.values`). A value node knows, from the text alone, which kinds it may have at run
time: a constant or a system property has one, an application property may have any. A node
whose kinds are empty is always NULL (the constant ``NULL``, an unknown system property value).

Conditions (comparisons, LIKE, IN, IS NULL, EXISTS, NOT/AND/OR) are not values: they are
three-valued (true, false, unknown) and only conditions may be combined with NOT, AND and OR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Optional, Tuple, Union

LONG, DOUBLE, STRING, BOOL, TIMESTAMP, UUID, BYTES, TIMESPAN = "ldsbtuyp"

#: Every kind, as an application property of unknown type may have any of them.
ANY: FrozenSet[str] = frozenset(LONG + DOUBLE + STRING + BOOL + TIMESTAMP + UUID + BYTES)
NUMERIC: FrozenSet[str] = frozenset(LONG + DOUBLE)
#: Kinds with an order (<, <=, >, >=); the others only compare with = and <>.
ORDERED: FrozenSet[str] = frozenset(LONG + DOUBLE + STRING + TIMESTAMP + TIMESPAN)

KIND_NAMES = {LONG: "integer", DOUBLE: "float", STRING: "string", BOOL: "boolean",
              TIMESTAMP: "timestamp", UUID: "uuid", BYTES: "bytes", TIMESPAN: "timespan"}


def describe(kinds: FrozenSet[str]) -> str:
    """``integer or float`` (sorted, for messages); ``NULL`` for no kind."""
    if not kinds:
        return "NULL"
    if kinds >= ANY:
        return "a value of any type"
    return " or ".join(sorted(KIND_NAMES[k] for k in kinds))


@dataclass(frozen=True)
class Pos:
    """Where a node starts in the text (1-based)."""

    line: int
    column: int


# -- values -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Const:
    """A constant, or a parameter replaced by its value; ``kind`` is None for NULL."""

    pos: Pos
    value: object
    kind: Optional[str]

    @property
    def kinds(self) -> FrozenSet[str]:
        return frozenset() if self.kind is None else frozenset(self.kind)


@dataclass(frozen=True)
class SystemProperty:
    """A ``sys.`` property: its Service Bus name, the message column it reads and its kind.

    ``column`` is None for properties a message being routed does not have yet (their value is
    ``constant``, e.g. a delivery count of 0, or NULL).
    """

    name: str
    column: Optional[str]
    kind: str
    constant: object = None


@dataclass(frozen=True)
class UserProp:
    """An application property (``user.x``, ``x``, ``[x y]``)."""

    pos: Pos
    name: str
    kinds: FrozenSet[str] = ANY


@dataclass(frozen=True)
class SysProp:
    pos: Pos
    prop: SystemProperty

    @property
    def kinds(self) -> FrozenSet[str]:
        return frozenset(self.prop.kind)


@dataclass(frozen=True)
class PropertyCall:
    """``property(name)`` / ``p(name)``: the application property named by a string value."""

    pos: Pos
    name: "Value"
    kinds: FrozenSet[str] = ANY


@dataclass(frozen=True)
class NewId:
    """``newid()``: a new random UUID per evaluation."""

    pos: Pos
    kinds: FrozenSet[str] = frozenset(UUID)


@dataclass(frozen=True)
class Negate:
    pos: Pos
    operand: "Value"
    kinds: FrozenSet[str]


@dataclass(frozen=True)
class Arith:
    """``left op right`` with op one of + - * / %."""

    pos: Pos
    op: str
    left: "Value"
    right: "Value"
    kinds: FrozenSet[str]


Value = Union[Const, UserProp, SysProp, PropertyCall, NewId, Negate, Arith]


# -- conditions -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Compare:
    """``left op right``; op is one of = <> < <= > >= (``!=`` is read as ``<>``)."""

    pos: Pos
    op: str
    left: Value
    right: Value


@dataclass(frozen=True)
class Like:
    """``operand [NOT] LIKE pattern [ESCAPE 'c']``; the escape character is a constant."""

    pos: Pos
    operand: Value
    pattern: Value
    escape: Optional[str]
    negated: bool


@dataclass(frozen=True)
class In:
    pos: Pos
    operand: Value
    items: Tuple[Value, ...]
    negated: bool


@dataclass(frozen=True)
class IsNull:
    pos: Pos
    operand: Value
    negated: bool


@dataclass(frozen=True)
class Exists:
    pos: Pos
    prop: Union[UserProp, SysProp]


@dataclass(frozen=True)
class Not:
    pos: Pos
    operand: "Condition"


@dataclass(frozen=True)
class And:
    pos: Pos
    left: "Condition"
    right: "Condition"


@dataclass(frozen=True)
class Or:
    pos: Pos
    left: "Condition"
    right: "Condition"


Condition = Union[Compare, Like, In, IsNull, Exists, Not, And, Or]
Node = Union[Value, Condition]
CONDITIONS = (Compare, Like, In, IsNull, Exists, Not, And, Or)


# -- rules ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FilterExpr:
    """A parsed SQL filter: the text and its condition."""

    sql: str
    condition: Condition


@dataclass(frozen=True)
class SetStmt:
    pos: Pos
    name: str
    value: Value


@dataclass(frozen=True)
class RemoveStmt:
    pos: Pos
    name: str


Statement = Union[SetStmt, RemoveStmt]


@dataclass(frozen=True)
class ActionExpr:
    """A parsed SQL action: the text and its statements, applied in order."""

    sql: str
    statements: Tuple[Statement, ...]
