"""Binding rule sub-expressions once per row, in layers (compile-time structure, no data).

Rules compile to Spark Columns by composition, and a node reads its operands several times (a
value's kind once per pair of kinds it is compared with, a condition's value twice under AND).
Written out at each read, a chain such as ``a + b + c + d`` or ``a AND b AND c ...`` grows the
expression tree exponentially: plans of megabytes, minutes of planning, an executor out of heap.

:func:`let` evaluates columns once per row and hands them to the rest of the expression as
lambda variables (``transform`` over a one-element array). Spark's planner walks nested
higher-order functions in time exponential in their *depth* (each level asks its child for both
its type and its nullability), so lets must not nest once per node either. :class:`Scope`
collects the bindings of a rule by *layer*: a node is bound one layer above its deepest bound
operand, and all the bindings of one layer share one ``let``. The depth is then the nesting
of operators that need binding (arithmetic inside arithmetic, AND inside OR), not the length of
a rule: ``x = 1 OR x = 2 OR ... OR x = 30`` is two layers.
"""

from __future__ import annotations

import itertools
from typing import Callable, Dict, List, Tuple

Env = Dict[str, object]

__all__ = ["let", "Scope", "Env"]


def let(columns: Dict[str, object], body: Callable[[Env], object]):
    """``body(bound)``, where ``bound[name]`` reads ``columns[name]`` evaluated once per row."""
    from pyspark.sql import functions as F

    names = list(columns)
    if not names:
        return body({})
    bound = F.array(F.struct(*[columns[n].alias(n) for n in names]))
    return F.transform(bound, lambda row: body({n: row[n] for n in names}))[0]


class Scope:
    """The layered bindings of one compiled expression (see the module doc).

    A compiled node is ``(layer, build)``: ``build(env)`` gives its Columns from the bound
    names in ``env``, and ``layer`` is the deepest binding it reads (0: none).
    :meth:`bind` registers Columns to be evaluated once at a layer and returns a reader;
    :meth:`emit` nests one ``let`` per layer around the final expression.
    """

    def __init__(self) -> None:
        self._layers: List[List[Tuple[str, Callable[[Env], Dict[str, object]]]]] = []
        self._names = (f"b{i}" for i in itertools.count())
        self._shared: Dict[object, Callable[[Env], Dict[str, object]]] = {}

    def bind(self, layer: int, columns: Callable[[Env], Dict[str, object]],
             key: object = None) -> Callable[[Env], Dict[str, object]]:
        """Evaluate ``columns(env)`` once per row at ``layer`` (>= 1); returns ``read(env)``,
        the same names mapped to their bound variables. Bindings given the same ``key`` are
        made once (one property read by several parts of a rule)."""
        if key is not None and key in self._shared:
            return self._shared[key]
        while len(self._layers) < layer:
            self._layers.append([])
        prefix = next(self._names)
        names: List[str] = []

        def evaluate(env: Env) -> Dict[str, object]:
            made = columns(env)
            names[:] = list(made)
            return {f"{prefix}_{n}": c for n, c in made.items()}

        def read(env: Env) -> Dict[str, object]:
            return {n: env[f"{prefix}_{n}"] for n in names}

        self._layers[layer - 1].append((prefix, evaluate))
        if key is not None:
            self._shared[key] = read
        return read

    def emit(self, body: Callable[[Env], object], env: Env = None, layer: int = 0):
        """The final Column: ``body`` inside one ``let`` per layer, outermost first."""
        env = dict(env or {})
        if layer == len(self._layers):
            return body(env)
        columns: Dict[str, object] = {}
        for _, evaluate in self._layers[layer]:
            columns.update(evaluate(env))
        return let(columns, lambda row: self.emit(body, {**env, **row}, layer + 1))
