"""Nodes to Spark Columns: a filter becomes ``(matched, error)``, an action the new
``application_properties`` text and an error (TOPIC-4, TOPIC-5).

Semantics (Service Bus's SQL filter reference, and C# operator rules where it points to them):

* Unknown: a missing application property, or one holding null, is *unknown*; so is a NULL
  system property. Arithmetic, comparisons, LIKE and IN with an unknown operand are unknown;
  NOT/AND/OR follow the three-valued tables (Spark's own NOT/AND/OR are those tables). A filter
  matches only where its condition is true.
* Types: integers compare and compute with floats as floats (C# promotion); any other kind only
  with its own kind. ``<``, ``<=``, ``>``, ``>=`` need numbers, strings (ordinal order),
  timestamps or timespans; booleans, UUIDs and bytes compare with ``=`` and ``<>`` only. ``+``
  joins two strings. A pair of kinds that does not fit is an *evaluation error* for that message
  (a string property compared with a number), never a Spark failure and never a silent match.
* Integer arithmetic is 64-bit: an overflow, a division or remainder by zero is an evaluation
  error; ``/`` truncates toward zero and ``%`` takes the dividend's sign (C#). Float arithmetic
  is IEEE: ``x / 0.0`` is +-Infinity or NaN, as in C#; NaN equals nothing, not even NaN.
* LIKE: ``%`` any run, ``_`` one character, no escape character unless ESCAPE gives one; after
  it, ``%``, ``_`` or the escape character stand for themselves (so does any other character,
  and an escape character at the very end).
* AND and OR evaluate left to right and skip their right side once the left side decides the
  result (false AND ..., true OR ...), so a guard such as ``EXISTS(n) AND n > 5`` keeps the
  right side's evaluation errors away, as C#'s ``&&`` and ``||`` do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from .nodes import (DOUBLE, KIND_NAMES, LONG, STRING, UUID, ActionExpr, And, Arith, Compare,
                    Const, Exists, FilterExpr, In, IsNull, Like, Negate, NewId, Not, Or,
                    PropertyCall, RemoveStmt, SysProp, UserProp)
from .parse import COMPARISONS, FLOAT_ARITH, arith_kind, comparable
from .scope import Env, Scope, let
from .values import (Val, column_val, const_val, first_error, lookup, null_val, properties_bag,
                     remove_property, render_bag, set_property, to_typed, typed_val)

__all__ = ["compile_filter", "compile_action", "compare", "condition", "value", "Cond",
           "bind_cond", "bind_val",
           "Context", "message_bag", "PROPERTIES_COLUMN"]

#: The column a message's application properties are read from (and written to by actions).
PROPERTIES_COLUMN = "application_properties"

_LONG_MIN = -(2 ** 63)


def _f():
    from pyspark.sql import functions as F

    return F


@dataclass(frozen=True)
class Cond:
    """A three-valued condition column and its error column (None: never an error)."""

    value: object
    error: Optional[object] = None


class Context:
    """What values are read from: the message columns and the property bag (a map Column, and
    its error Column). :func:`sbdelta.rules.with_properties` binds the bag once per row and
    hands the bound names in here, so that every property a rule reads looks it up in the same
    map instead of parsing the JSON text again."""

    def __init__(self, bag, bag_error) -> None:
        self.bag = bag
        self.bag_error = bag_error


_UNBUILT = object()
_BAG: list = [_UNBUILT, None]  # (the Spark context, its message_bag())


def message_bag() -> Tuple[object, object]:
    """``(bag, error)`` of the message's application properties column, built once per Spark
    context (Columns are immutable; building this one costs about a hundred py4j calls). A
    Spark Connect process has no context (None): its Columns are plain expressions, built
    once for every session."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if _BAG[0] is not context:
        _BAG[:] = [context, properties_bag(_f().col(PROPERTIES_COLUMN))]
    return _BAG[1]


# -- filters ------------------------------------------------------------------------------------
#
# A node compiles to ``(layer, build)`` (see :mod:`.scope`): ``build(env)`` makes its Val or
# Cond from the variables bound so far. Nodes whose Columns their parent reads more than once
# (arithmetic, the operands of AND/OR, property lookups) are bound in the scope.

Compiled = Tuple[int, Callable[[Env], object]]


def compile_filter(expr: FilterExpr, ctx: Context):
    """The Column ``struct<matched: boolean, error: string>`` of a parsed filter (see
    :func:`sbdelta.rules.filter_column`)."""
    F = _f()
    scope = Scope()
    _, build = condition(expr.condition, ctx, scope)

    def finish(env):
        cond = build(env)
        error = cond.error if cond.error is not None else F.lit(None).cast("string")
        return F.struct(F.when(error.isNull(), cond.value).alias("matched"),
                        error.alias("error"))

    return scope.emit(finish)


def bind_cond(scope: Scope, compiled: Compiled) -> Compiled:
    layer, build = compiled
    holder = {}

    def columns(env):
        cond = holder["cond"] = build(env)
        return {"value": cond.value} if cond.error is None else {"value": cond.value,
                                                                   "error": cond.error}

    read = scope.bind(layer + 1, columns)

    def bound(env):
        row = read(env)
        return Cond(row["value"], row.get("error"))

    return layer + 1, bound


def bind_val(scope: Scope, compiled: Compiled) -> Compiled:
    layer, build = compiled
    holder = {}

    def columns(env):
        val = holder["val"] = build(env)
        made = {"kind": val.kind}
        made.update((f"slot_{k}", slot) for k, slot in val.slots.items())
        if val.error is not None:
            made["error"] = val.error
        return made

    read = scope.bind(layer + 1, columns)

    def bound(env):
        row, val = read(env), holder["val"]
        return Val(val.kinds, row["kind"], {k: row[f"slot_{k}"] for k in val.slots},
                   row.get("error"))

    return layer + 1, bound


def _chain(node, kind) -> list:
    """The operands of a chain of one connective: ``a AND (b AND c) AND d`` -> [a, b, c, d]."""
    if isinstance(node, kind):
        return _chain(node.left, kind) + _chain(node.right, kind)
    return [node]


def condition(node, ctx: Context, scope: Scope) -> Compiled:
    F = _f()
    if isinstance(node, Compare):
        (la, a), (lb, b) = value(node.left, ctx, scope), value(node.right, ctx, scope)
        return max(la, lb), lambda env: compare(node.op, a(env), b(env))
    if isinstance(node, (And, Or)):
        is_and = isinstance(node, And)
        operands = [bind_cond(scope, condition(c, ctx, scope))
                    for c in _chain(node, type(node))]

        def combine(env):
            conds = [build(env) for _, build in operands]
            result, errors, undecided = None, [], None
            for cond in conds:
                result = cond.value if result is None else (
                    result & cond.value if is_and else result | cond.value)
                if cond.error is not None:
                    # AND and OR skip their right side once the left decides the result.
                    errors.append(cond.error if undecided is None
                                  else F.when(undecided, cond.error))
                still = cond.value.isNull() | (cond.value if is_and else ~cond.value)
                undecided = still if undecided is None else undecided & still
            return Cond(result, first_error(*errors))

        return max(layer for layer, _ in operands), combine
    if isinstance(node, Not):
        layer, inner = condition(node.operand, ctx, scope)

        def negate(env):
            cond = inner(env)
            return Cond(~cond.value, cond.error)

        return layer, negate
    if isinstance(node, IsNull):
        layer, operand = value(node.operand, ctx, scope)

        def is_null(env):
            val = operand(env)
            return Cond(val.kind.isNotNull() if node.negated else val.kind.isNull(), val.error)

        return layer, is_null
    if isinstance(node, Exists):
        if isinstance(node.prop, SysProp):
            return 0, lambda env: Cond(F.lit(True))
        return 0, lambda env: Cond(lookup(ctx.bag, F.lit(node.prop.name))[1], ctx.bag_error)
    if isinstance(node, In):
        compiled = [value(v, ctx, scope) for v in (node.operand, *node.items)]

        def test(env):
            operand, *items = [build(env) for _, build in compiled]
            tests = [compare("=", operand, item) for item in items]
            result = tests[0].value
            for t in tests[1:]:
                result = result | t.value  # SQL IN: true if one is; else unknown if one is
            cond = Cond(result, first_error(*(t.error for t in tests)))
            return Cond(~cond.value, cond.error) if node.negated else cond

        return max(layer for layer, _ in compiled), test
    if isinstance(node, Like):
        (la, a), (lp, p) = value(node.operand, ctx, scope), value(node.pattern, ctx, scope)
        return max(la, lp), lambda env: like(node, a(env), p(env))
    raise TypeError(f"not a condition: {node!r}")


def compare(op: str, a: Val, b: Val) -> Cond:
    """``a op b`` over every pair of kinds the operands may have."""
    F = _f()
    result, errors = None, None
    for x in sorted(a.kinds):
        for y in sorted(b.kinds):
            both = a.is_kind(x) & b.is_kind(y)
            if comparable(x, y, op):
                test = _compare_pair(op, a, b, x, y)
                result = F.when(both, test) if result is None else result.when(both, test)
            else:
                text = f"cannot compare {KIND_NAMES[x]} with {KIND_NAMES[y]} using '{op}'"
                errors = (F.when(both, F.lit(text)) if errors is None
                          else errors.when(both, F.lit(text)))
    if result is None:
        result = F.lit(None).cast("boolean")
    return Cond(result, first_error(a.error, b.error, errors))


def _compare_pair(op: str, a: Val, b: Val, x: str, y: str):
    F = _f()
    apply = COMPARISONS[op]
    if x in (LONG, DOUBLE) and y in (LONG, DOUBLE):
        if x == y == LONG:
            return apply(a.slot(LONG), b.slot(LONG))
        da, db = a.double(x), b.double(y)
        nan = F.isnan(da) | F.isnan(db)
        return F.when(nan, F.lit(op == "<>")).otherwise(apply(da, db))
    return apply(a.slot(x), b.slot(y))


def like(node: Like, a: Val, p: Val) -> Cond:
    F = _f()
    if STRING in a.kinds and STRING in p.kinds:
        ok = a.is_kind(STRING) & p.is_kind(STRING)
        if node.escape is None:
            escape, pattern = "\\", F.regexp_replace(p.slot(STRING), r"\\", r"\\\\")
        else:
            escape = node.escape
            q = "\\x{%x}" % ord(escape)
            pattern = F.regexp_replace(p.slot(STRING), f"(?s)({q}[%_{q}])|{q}(.)|({q})$",
                                       "$1$2$3$3")
        result = F.when(ok, F.like(a.slot(STRING), pattern, F.lit(escape)))
    else:
        result = F.lit(None).cast("boolean")
    errors = []
    for val, what in ((a, "LIKE"), (p, "a LIKE pattern")):
        for k in sorted(val.kinds - {STRING}):
            errors.append(F.when(val.is_kind(k), F.lit(f"{what} needs a string, not "
                                                      f"{KIND_NAMES[k]}")))
    cond = Cond(result, first_error(a.error, p.error, *errors))
    return Cond(~cond.value, cond.error) if node.negated else cond


# -- values -------------------------------------------------------------------------------------

def value(node, ctx: Context, scope: Scope) -> Compiled:
    F = _f()
    if isinstance(node, Const):
        return 0, lambda env: const_val(node.value, node.kind)
    if isinstance(node, UserProp):
        # Looked up once per row for the whole rule, however often the rule reads it.
        looked_up = scope.bind(1, lambda env: {"typed": lookup(ctx.bag, F.lit(node.name))[0]},
                               key=("property", node.name))
        return 1, lambda env: typed_val(looked_up(env)["typed"], node.kinds, ctx.bag_error)
    if isinstance(node, SysProp):
        prop = node.prop
        if prop.column is None:
            return 0, lambda env: (null_val() if prop.constant is None
                                   else const_val(prop.constant, prop.kind))
        return 0, lambda env: column_val(F.col(prop.column), prop.kind)
    if isinstance(node, PropertyCall):
        layer, name_of = value(node.name, ctx, scope)

        def by_name(env):
            name = name_of(env)
            if STRING not in name.kinds:
                return null_val().with_error(name.error)
            typed, _ = lookup(ctx.bag, F.when(name.is_kind(STRING), name.slot(STRING)))
            wrong = [F.when(name.is_kind(k), F.lit(f"property(name) needs a string, not "
                                                  f"{KIND_NAMES[k]}"))
                     for k in sorted(name.kinds - {STRING})]
            return typed_val(typed, node.kinds, first_error(name.error, *wrong, ctx.bag_error))

        return bind_val(scope, (layer, by_name))
    if isinstance(node, NewId):
        # Bound, so that every read of one NEWID() sees the same UUID.
        return bind_val(scope, (0, lambda env: Val(node.kinds, F.lit(UUID),
                                                    {UUID: F.expr("uuid()")})))
    if isinstance(node, Negate):
        layer, operand = value(node.operand, ctx, scope)
        return bind_val(scope, (layer, lambda env: _negate(operand(env))))
    if isinstance(node, Arith):
        (la, a), (lb, b) = value(node.left, ctx, scope), value(node.right, ctx, scope)
        return bind_val(scope, (max(la, lb), lambda env: _arith(node, a(env), b(env))))
    raise TypeError(f"not a value: {node!r}")


def _negate(a: Val) -> Val:
    F = _f()
    kinds = a.kinds & {LONG, DOUBLE}
    slots, errors = {}, []
    if LONG in kinds:
        negated = F.try_subtract(F.lit(0).cast("bigint"), a.slot(LONG))
        slots[LONG] = negated
        errors.append(F.when(a.is_kind(LONG) & negated.isNull(), F.lit("integer overflow")))
    if DOUBLE in kinds:
        slots[DOUBLE] = -a.slot(DOUBLE)
    for k in sorted(a.kinds - kinds):
        errors.append(F.when(a.is_kind(k), F.lit(f"unary '-' needs a number, not "
                                                f"{KIND_NAMES[k]}")))
    kind = F.when(a.kind.isin(*sorted(kinds)), a.kind) if kinds else F.lit(None).cast("string")
    return Val(kinds, kind, slots, first_error(a.error, *errors))


def _arith(node: Arith, a: Val, b: Val) -> Val:
    F = _f()
    op = node.op
    kind, slots, errors = None, {}, []
    for x in sorted(a.kinds):
        for y in sorted(b.kinds):
            both = a.is_kind(x) & b.is_kind(y)
            k = arith_kind(op, x, y)
            if k is None:
                errors.append(F.when(both, F.lit(
                    f"'{op}' cannot combine {KIND_NAMES[x]} with {KIND_NAMES[y]}")))
                continue
            result, error = _arith_pair(op, a, b, x, y)
            kind = F.when(both, F.lit(k)) if kind is None else kind.when(both, F.lit(k))
            slots[k] = F.when(both, result) if k not in slots else slots[k].when(both, result)
            if error is not None:
                errors.append(F.when(both, error))
    if kind is None:
        kind = F.lit(None).cast("string")
    return Val(node.kinds, kind, slots, first_error(a.error, b.error, *errors))


def _arith_pair(op: str, a: Val, b: Val, x: str, y: str):
    """``(result, error)`` of ``a op b`` for kinds ``x`` and ``y``."""
    F = _f()
    if x == y == STRING:
        return F.concat(a.slot(STRING), b.slot(STRING)), None
    if x == y == LONG:
        p, q = a.slot(LONG), b.slot(LONG)
        if op in "+-*":
            checked = {"+": F.try_add, "-": F.try_subtract, "*": F.try_multiply}[op](p, q)
            return checked, F.when(checked.isNull(), F.lit("integer overflow"))
        zero = q == 0
        if op == "%":
            return F.when(~zero, p % q), F.when(zero, F.lit("integer division by zero"))
        overflow = (p == F.lit(_LONG_MIN)) & (q == -1)
        exact = (p - p % q).cast("decimal(20,0)") / q.cast("decimal(20,0)")
        quotient = F.when(~zero & ~overflow, exact.cast("bigint"))
        return quotient, (F.when(zero, F.lit("integer division by zero"))
                          .when(overflow, F.lit("integer overflow")))
    p, q = a.double(x), b.double(y)
    if op in FLOAT_ARITH:
        return FLOAT_ARITH[op](p, q), None
    nan = F.lit(float("nan"))
    if op == "%":
        return F.when(q == 0, nan).otherwise(p % q), None
    by_zero = (F.when(F.isnan(p) | (p == 0), nan).when(p > 0, F.lit(float("inf")))
               .otherwise(F.lit(float("-inf"))))
    return F.when(q == 0, by_zero).otherwise(p / q), None


# -- actions ------------------------------------------------------------------------------------

def compile_action(expr: ActionExpr, ctx: Context):
    """The Column ``struct<application_properties: string, error: string>`` of a parsed action.

    Statements apply in order, each seeing the properties the previous ones left: the bag is
    bound after each statement. Where the action fails for a message, the properties column
    keeps the original text.
    """
    F = _f()
    original = F.col(PROPERTIES_COLUMN)

    def run(statements, bag, error):
        if not statements:
            error = error if error is not None else F.lit(None).cast("string")
            return F.struct(F.when(error.isNull(), render_bag(bag)).otherwise(original)
                            .alias("application_properties"), error.alias("error"))
        statement, rest = statements[0], statements[1:]
        if isinstance(statement, RemoveStmt):
            return let({"bag": remove_property(bag, statement.name)},
                       lambda row: run(rest, row["bag"], error))
        scope = Scope()
        _, build = value(statement.value, Context(bag, ctx.bag_error), scope)

        def assign(env):
            val = build(env)
            columns = {"bag": set_property(bag, statement.name, _convert_to_existing(
                bag, statement.name, to_typed(val)))}
            new_error = first_error(error, val.error)
            if new_error is not None:
                columns["error"] = new_error
            return let(columns, lambda row: run(rest, row["bag"], row.get("error")))

        return scope.emit(assign)

    return run(list(expr.statements), ctx.bag, ctx.bag_error)


def _convert_to_existing(bag, name: str, typed):
    """C#'s implicit conversion on SET: an integer stored over a float property stays a float."""
    F = _f()
    existing, _ = lookup(bag, F.lit(name))
    widen = (existing.substr(1, 1) == DOUBLE) & (typed.substr(1, 1) == LONG)
    as_double = F.concat(F.lit(DOUBLE), typed.substr(F.lit(2), F.length(typed))
                         .cast("bigint").cast("double").cast("string"))
    return F.when(widen, as_double).otherwise(typed)

