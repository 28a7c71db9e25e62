"""Text to nodes: parse a rule's SQL, check it, and report any error with its line and column.

Everything a rule's text alone can tell is checked here, when the rule is created (TOPIC-4):
syntax, quotes, known functions and ``sys.`` properties, supplied parameters, the length limit,
and types that can never fit (``NOT 5``, ``'a' + 1``, ``'a' > 1``). What depends on a message
(the type an application property holds, a divisor of zero) is left to evaluation.
"""

from __future__ import annotations

import math
import operator
import uuid
from datetime import datetime, timezone
from typing import Callable, List, Mapping, NoReturn, Optional, Tuple

from ..exceptions import RuleSyntaxError
from .grammar import KEYWORDS, parser
from .nodes import (ANY, BOOL, BYTES, CONDITIONS, DOUBLE, LONG, NUMERIC, ORDERED, STRING,
                    TIMESTAMP, UUID, ActionExpr, And, Arith, Compare, Const, Exists, FilterExpr,
                    In, IsNull, Like, Negate, NewId, Not, Or, Pos, PropertyCall, RemoveStmt,
                    SetStmt, SysProp, UserProp, describe)
from .system import system_property, system_property_names

__all__ = ["parse_filter", "parse_action", "MAX_SQL_LENGTH", "comparable", "arith_kind"]

#: The longest filter or action text Service Bus accepts, in characters.
MAX_SQL_LENGTH = 1024

_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1
_FUNCTIONS = "newid(), property(name), p(name)"
_TERMINALS = {
    "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "DOT": "'.'", "EQUAL": "'='",
    "COMPARE": "a comparison (=, <>, !=, <, <=, >, >=)", "EQ": "'='", "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*', '/' or '%'", "NAME": "a name", "DELIMITED": "a name",
    "QUOTED": "a name", "STRING": "a string constant", "INTEGER": "a number",
    "DECIMAL": "a number", "REAL": "a number", "PARAM": "a @parameter", "_SEMI": "';'",
    "$END": "the end of the text",
}


def comparable(a: str, b: str, op: str) -> bool:
    """Whether values of kinds ``a`` and ``b`` can be compared with ``op``.

    Numbers compare with numbers (an integer is promoted to float, as C# does); any other kind
    only with its own kind; ``<``, ``<=``, ``>``, ``>=`` need an ordered kind.
    """
    if a in NUMERIC and b in NUMERIC:
        return True
    if a != b:
        return False
    return op in ("=", "<>") or a in ORDERED


#: The comparison operators, over the values of either evaluator (Spark Columns in
#: :mod:`.compile`, Python values in :mod:`.evaluate`).
COMPARISONS: Mapping[str, Callable] = {"=": operator.eq, "<>": operator.ne, "<": operator.lt,
                                       "<=": operator.le, ">": operator.gt, ">=": operator.ge}
#: ``+ - *`` on two floats (IEEE, the same in either evaluator).
FLOAT_ARITH: Mapping[str, Callable] = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def arith_kind(op: str, a: str, b: str) -> Optional[str]:
    """The kind of ``a op b``, or None when the operator does not apply to those kinds."""
    if a in NUMERIC and b in NUMERIC:
        return LONG if a == b == LONG else DOUBLE
    if op == "+" and a == b == STRING:
        return STRING
    return None


def parse_filter(sql: str, parameters: Optional[Mapping[str, object]] = None) -> FilterExpr:
    """Parse and check a SQL filter.

    Args:
        sql: The filter text, at most 1024 characters.
        parameters: Values for ``@name`` placeholders (keys with or without the ``@``).

    Raises:
        RuleSyntaxError: The text is not a valid filter; the error has the line and column.
    """
    builder = _Builder(sql, parameters, "filter")
    tree = builder.syntax("filter")
    condition = builder.condition(builder.build(tree.children[0]), "a filter")
    return FilterExpr(sql, condition)


def parse_action(sql: str, parameters: Optional[Mapping[str, object]] = None) -> ActionExpr:
    """Parse and check a SQL action (``SET x = expr``, ``REMOVE x``, separated by ``;``).

    Only application properties can be set or removed; ``SET sys.X`` is refused.

    Raises:
        RuleSyntaxError: The text is not a valid action; the error has the line and column.
    """
    builder = _Builder(sql, parameters, "action")
    tree = builder.syntax("action")
    return ActionExpr(sql, tuple(builder.statement(child) for child in tree.children))


class _Builder:
    """One parse: the text, its parameters, and the conversion of lark's tree into nodes."""

    def __init__(self, sql: object, parameters: Optional[Mapping[str, object]], kind: str
                 ) -> None:
        self.kind = kind
        if not isinstance(sql, str):
            raise RuleSyntaxError(f"the {kind} must be a str, got {type(sql).__name__}",
                                  sql="", line=1, column=1, kind=kind)
        self.sql = sql
        if parameters is not None and not isinstance(parameters, Mapping):
            self.fail(Pos(1, 1), f"parameters must be a dict, got {type(parameters).__name__}")
        self.parameters = dict(parameters or {})

    # -- errors -------------------------------------------------------------------------------

    def fail(self, pos: Pos, reason: str) -> NoReturn:
        raise RuleSyntaxError(reason, sql=self.sql, line=pos.line, column=pos.column,
                              kind=self.kind)

    def _pos_of_offset(self, offset: int) -> Pos:
        before = self.sql[:offset]
        line = before.count("\n") + 1
        return Pos(line, offset - (before.rfind("\n") + 1) + 1)

    # -- syntax ---------------------------------------------------------------------------------

    def syntax(self, start: str):
        from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

        if len(self.sql) > MAX_SQL_LENGTH:
            self.fail(self._pos_of_offset(MAX_SQL_LENGTH),
                      f"the text is {len(self.sql)} characters long; at most {MAX_SQL_LENGTH} "
                      f"are allowed")
        if not self.sql.strip():
            self.fail(Pos(1, 1), f"the {self.kind} is empty")
        try:
            return parser(start).parse(self.sql)
        except UnexpectedCharacters as exc:
            char = self.sql[exc.pos_in_stream]
            opened = {"'": "a string constant is not closed (write '' for a quote inside it)",
                      "[": "a [delimited name] is not closed (write ]] for a ] inside it)",
                      '"': 'a "quoted name" is not closed (write "" for a quote inside it)'}
            reason = opened.get(char, f"unexpected character {char!r}")
            self.fail(Pos(exc.line, exc.column), reason)
        except UnexpectedToken as exc:
            token = exc.token
            if token.type == "$END":
                where = self._pos_of_offset(len(self.sql.rstrip()))
                found = "the text ends too early"
            else:
                where = Pos(token.line, token.column)
                found = f"unexpected {token.value!r}"
                if token.value.lower() in KEYWORDS and "NAME" in exc.expected | {
                        t for t in (exc.interactive_parser.accepts()
                                    if exc.interactive_parser is not None else ())}:
                    found += (f" ({token.value.upper()} is a keyword; write [{token.value}] for "
                              f"a property of that name)")
            accepted = set(exc.expected)
            if exc.interactive_parser is not None:  # exact: lark's table merges lookaheads
                accepted = exc.interactive_parser.accepts() or accepted
            expected = sorted({_TERMINALS.get(t, t) for t in accepted})
            self.fail(where, f"{found}; expected {', '.join(expected[:12])}")
        except UnexpectedInput as exc:  # any other lark complaint, with its position
            self.fail(Pos(getattr(exc, "line", 1), getattr(exc, "column", 1)), str(exc))

    # -- tree -> nodes --------------------------------------------------------------------------

    def build(self, tree):
        from lark import Token

        if isinstance(tree, Token):  # inlined single-token rules do not occur; keep a guard
            self.fail(Pos(tree.line, tree.column), f"unexpected {tree.value!r}")
        handler: Callable = getattr(self, "_" + tree.data)
        return handler(tree, Pos(tree.meta.line, tree.meta.column), tree.children)

    def value(self, node, context: str):
        if isinstance(node, CONDITIONS):
            self.fail(node.pos, f"{context} needs a value, but this is a condition")
        return node

    def condition(self, node, context: str):
        if not isinstance(node, CONDITIONS):
            self.fail(node.pos, f"{context} needs a condition (a comparison, LIKE, IN, IS NULL or "
                      f"EXISTS), but this is a value ({describe(node.kinds)})")
        return node

    def _or_op(self, tree, pos, children):
        left, op, right = children
        return Or(pos, self.condition(self.build(left), "OR"),
                  self.condition(self.build(right), "OR"))

    def _and_op(self, tree, pos, children):
        left, op, right = children
        return And(pos, self.condition(self.build(left), "AND"),
                   self.condition(self.build(right), "AND"))

    def _not_op(self, tree, pos, children):
        op, operand = children
        return Not(pos, self.condition(self.build(operand), "NOT"))

    def _compare(self, tree, pos, children):
        left, op, right = children
        symbol = "<>" if op.value == "!=" else op.value
        a = self.value(self.build(left), f"'{op.value}'")
        b = self.value(self.build(right), f"'{op.value}'")
        if a.kinds and b.kinds and not any(comparable(x, y, symbol)
                                           for x in a.kinds for y in b.kinds):
            self.fail(Pos(op.line, op.column),
                      f"cannot compare {describe(a.kinds)} with {describe(b.kinds)} using "
                      f"'{op.value}'")
        return Compare(pos, symbol, a, b)

    def _like(self, tree, pos, children):
        operand, negated, _, pattern, _, escape = children
        a = self._string_value(self.build(operand), "LIKE")
        p = self._string_value(self.build(pattern), "a LIKE pattern")
        char = None
        if escape is not None:
            node = self.build(escape)
            if not (isinstance(node, Const) and node.kind == STRING and len(node.value) == 1):
                self.fail(node.pos, "ESCAPE needs a constant string of exactly one character")
            char = node.value
        return Like(pos, a, p, char, negated is not None)

    def _string_value(self, node, context: str):
        node = self.value(node, context)
        if node.kinds and STRING not in node.kinds:
            self.fail(node.pos, f"{context} needs a string, but this is {describe(node.kinds)}")
        return node

    def _in_list(self, tree, pos, children):
        operand, negated, _, *items = children
        a = self.value(self.build(operand), "IN")
        values = []
        for item in items:
            b = self.value(self.build(item), "an IN list")
            if a.kinds and b.kinds and not any(comparable(x, y, "=")
                                               for x in a.kinds for y in b.kinds):
                self.fail(b.pos, f"cannot compare {describe(a.kinds)} with {describe(b.kinds)} "
                          f"in IN")
            values.append(b)
        return In(pos, a, tuple(values), negated is not None)

    def _is_null(self, tree, pos, children):
        operand, _, negated, _ = children
        return IsNull(pos, self.value(self.build(operand), "IS NULL"), negated is not None)

    def _exists(self, tree, pos, children):
        _, prop = children
        return Exists(pos, self.build(prop))

    def _arith(self, tree, pos, children):
        left, op, right = children
        a = self.value(self.build(left), f"'{op.value}'")
        b = self.value(self.build(right), f"'{op.value}'")
        kinds = frozenset(k for x in a.kinds for y in b.kinds
                          for k in [arith_kind(op.value, x, y)] if k is not None)
        if a.kinds and b.kinds and not kinds:
            self.fail(Pos(op.line, op.column), f"'{op.value}' cannot combine "
                      f"{describe(a.kinds)} with {describe(b.kinds)}")
        if (op.value in "/%" and isinstance(b, Const) and b.kind == LONG and b.value == 0
                and a.kinds == {LONG}):
            self.fail(Pos(op.line, op.column), "integer division by zero")
        return Arith(pos, op.value, a, b, kinds)

    def _sign(self, tree, pos, children):
        op, operand = children
        if (op.value == "-" and getattr(operand, "data", None) == "integer"
                and int(operand.children[0].value) == -_INT64_MIN):
            return Const(pos, _INT64_MIN, LONG)  # the one integer only its negation can write
        node = self.value(self.build(operand), f"unary '{op.value}'")
        if node.kinds and not node.kinds & NUMERIC:
            self.fail(node.pos, f"unary '{op.value}' needs a number, but this is "
                      f"{describe(node.kinds)}")
        if op.value == "+":
            return node
        if isinstance(node, Const) and node.kind == DOUBLE:
            return Const(pos, -node.value, DOUBLE)
        if isinstance(node, Const) and node.kind == LONG:
            return Const(pos, -node.value, LONG)
        return Negate(pos, node, node.kinds & NUMERIC)

    def _paren(self, tree, pos, children):
        return self.build(children[0])

    def _call(self, tree, pos, children):
        name, *args = children
        args = [a for a in args if a is not None]
        function = name.value.lower()
        where = Pos(name.line, name.column)
        if function == "newid":
            if args:
                self.fail(where, "newid() takes no arguments")
            return NewId(pos)
        if function in ("property", "p"):
            if len(args) != 1:
                self.fail(where, f"{name.value}(name) takes one argument, got {len(args)}")
            return PropertyCall(pos, self._string_value(self.build(args[0]),
                                                        f"{name.value}(name)"))
        self.fail(where, f"unknown function {name.value!r}; allowed: {_FUNCTIONS}")

    def _param(self, tree, pos, children):
        (token,) = children
        key = token.value
        for candidate in (key, key[1:]):
            if candidate in self.parameters:
                return self._constant(pos, key, self.parameters[candidate])
        folded = {str(k).lstrip("@").lower(): v for k, v in self.parameters.items()}
        if key[1:].lower() in folded:
            return self._constant(pos, key, folded[key[1:].lower()])
        given = ", ".join(sorted(str(k) for k in self.parameters)) or "none"
        self.fail(pos, f"parameter {key} is not supplied (parameters given: {given})")

    def _constant(self, pos: Pos, key: str, value: object) -> Const:
        if value is None:
            return Const(pos, None, None)
        if isinstance(value, bool):
            return Const(pos, value, BOOL)
        if isinstance(value, int):
            if not _INT64_MIN <= value <= _INT64_MAX:
                self.fail(pos, f"parameter {key}={value} is outside the 64-bit integer range")
            return Const(pos, int(value), LONG)
        if isinstance(value, float):
            return Const(pos, float(value), DOUBLE)
        if isinstance(value, str):
            return Const(pos, str(value), STRING)
        if isinstance(value, datetime):
            moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
            return Const(pos, moment.astimezone(timezone.utc), TIMESTAMP)
        if isinstance(value, uuid.UUID):
            return Const(pos, value, UUID)
        if isinstance(value, (bytes, bytearray)):
            return Const(pos, bytes(value), BYTES)
        self.fail(pos, f"parameter {key} has type {type(value).__name__}; allowed: str, int, "
                  f"float, bool, datetime, uuid.UUID, bytes or None")

    # literals

    def _integer(self, tree, pos, children):
        value = int(children[0].value)
        if value > _INT64_MAX:
            self.fail(pos, f"integer constant {children[0].value} is outside the 64-bit range")
        return Const(pos, value, LONG)

    def _decimal(self, tree, pos, children):
        return self._float(pos, children[0].value)

    def _real(self, tree, pos, children):
        return self._float(pos, children[0].value)

    def _float(self, pos: Pos, text: str) -> Const:
        value = float(text)
        if math.isinf(value):
            self.fail(pos, f"number {text} is outside the range of a 64-bit float")
        return Const(pos, value, DOUBLE)

    def _string(self, tree, pos, children):
        return Const(pos, children[0].value[1:-1].replace("''", "'"), STRING)

    def _true(self, tree, pos, children):
        return Const(pos, True, BOOL)

    def _false(self, tree, pos, children):
        return Const(pos, False, BOOL)

    def _null(self, tree, pos, children):
        return Const(pos, None, None)

    def _property(self, tree, pos, children):
        parts: List[Tuple[str, Pos, str]] = [(_identifier(t.value), Pos(t.line, t.column), t.type)
                                            for t in children]
        for name, where, kind in parts:
            if not name:
                self.fail(where, "a property name cannot be empty")
            if kind == "NAME" and name.lower() in KEYWORDS:
                self.fail(where, f"{name.upper()} is a keyword; write [{name}] for a property "
                          f"of that name")
        if len(parts) == 1:
            return UserProp(pos, parts[0][0], ANY)
        if len(parts) > 2:
            self.fail(parts[2][1], "a property is [scope.]name with one scope, sys or user; "
                      "write [a.b] for a name with dots")
        (scope, scope_pos, scope_type), (name, name_pos, _) = parts
        if scope_type == "NAME" and scope.lower() == "user":
            return UserProp(pos, name, ANY)
        if scope_type == "NAME" and scope.lower() == "sys":
            prop = system_property(name)
            if prop is None:
                self.fail(name_pos, f"there is no system property sys.{name}; allowed: "
                          f"{system_property_names()}")
            return SysProp(pos, prop)
        self.fail(scope_pos, f"unknown scope {scope!r}; a property is name, user.name or "
                  f"sys.name (write [{scope}.{name}] for a name with a dot)")

    # statements

    def statement(self, tree):
        pos = Pos(tree.meta.line, tree.meta.column)
        if tree.data == "set_stmt":
            _, prop, _, value = tree.children
            target = self._target(prop, "SET")
            return SetStmt(pos, target, self.value(self.build(value), "SET"))
        _, prop = tree.children
        return RemoveStmt(pos, self._target(prop, "REMOVE"))

    def _target(self, tree, verb: str) -> str:
        node = self.build(tree)
        if isinstance(node, SysProp):
            self.fail(node.pos, f"{verb} changes application properties only (name, user.name "
                      f"or [name]); sys.{node.prop.name} cannot be changed by a rule action")
        return node.name


def _identifier(text: str) -> str:
    if text.startswith("["):
        return text[1:-1].replace("]]", "]")
    if text.startswith('"'):
        return text[1:-1].replace('""', '"')
    return text
