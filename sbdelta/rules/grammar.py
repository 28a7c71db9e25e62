"""The SQL grammar of Service Bus rule filters and actions, for lark.

It follows the reference pages "Subscription Rule SQL Filter Syntax" and "SQL Action Syntax":

    predicate  := NOT predicate | predicate AND predicate | predicate OR predicate
                | expression {= | <> | != | > | >= | < | <=} expression
                | expression IS [NOT] NULL | expression [NOT] IN (expression, ...)
                | expression [NOT] LIKE pattern [ESCAPE escape_char]
                | EXISTS (property) | (predicate)
    expression := constant | function | property | @parameter
                | expression {+ | - | * | / | %} expression | {+ | -} expression | (expression)
    property   := [sys. | user.] name       name: regular, [delimited] or "quoted" 
    statements := statement [;] ...          statement: SET property = expression | REMOVE property

Predicates and expressions share one set of rules here (``(x)`` may be either); the parser's
second pass (:mod:`.parse`) tells them apart and reports a value used as a condition, or the
reverse, at its position. Keywords are case-insensitive and cannot be regular identifiers.
"""

from __future__ import annotations

from functools import lru_cache

GRAMMAR = r"""
filter: or_expr
action: statement (_SEMI* statement)* _SEMI*

statement: SET property EQ or_expr     -> set_stmt
         | REMOVE property              -> remove_stmt

?or_expr: and_expr
        | or_expr OR and_expr           -> or_op
?and_expr: not_expr
         | and_expr AND not_expr        -> and_op
?not_expr: predicate
         | NOT not_expr                 -> not_op
?predicate: sum
          | sum _comparison sum                         -> compare
          | sum [NOT] LIKE sum [ESCAPE sum]             -> like
          | sum [NOT] IN "(" or_expr ("," or_expr)* ")" -> in_list
          | sum IS [NOT] NULL                           -> is_null
          | EXISTS "(" property ")"                     -> exists
?sum: product
    | sum ADD_OP product                -> arith
?product: unary
        | product MUL_OP unary          -> arith
?unary: atom
      | ADD_OP unary                    -> sign
?atom: literal
     | property
     | PARAM                            -> param
     | NAME "(" [or_expr ("," or_expr)*] ")" -> call
     | "(" or_expr ")"                  -> paren

literal: REAL                           -> real
       | DECIMAL                        -> decimal
       | INTEGER                        -> integer
       | STRING                         -> string
       | TRUE                           -> true
       | FALSE                          -> false
       | NULL                           -> null

property: ident ("." ident)*
?ident: NAME | DELIMITED | QUOTED

AND: "and"i
OR: "or"i
NOT: "not"i
LIKE: "like"i
ESCAPE: "escape"i
IN: "in"i
IS: "is"i
NULL: "null"i
EXISTS: "exists"i
TRUE: "true"i
FALSE: "false"i
SET: "set"i
REMOVE: "remove"i

_comparison: EQ | COMPARE
EQ: "="
COMPARE: "<>" | "!=" | ">=" | "<=" | ">" | "<"
ADD_OP: "+" | "-"
MUL_OP: "*" | "/" | "%"
_SEMI: ";"

REAL.4: /([0-9]+(\.[0-9]*)?|\.[0-9]+)[eE][+-]?[0-9]+/
DECIMAL.3: /[0-9]+\.[0-9]*|\.[0-9]+/
INTEGER.2: /[0-9]+/
STRING: /'(?:[^']|'')*'/
NAME: /[^\W\d_]\w*/
DELIMITED: /\[(?:[^\]]|\]\])*\]/
QUOTED: /"(?:[^"]|"")*"/
PARAM: /@\w+/

%ignore /\s+/
"""

#: Words that cannot be regular identifiers (write ``[in]`` for a property named ``in``).
KEYWORDS = frozenset({"and", "or", "not", "like", "escape", "in", "is", "null", "exists", "true",
                      "false", "set", "remove"})


@lru_cache(maxsize=None)
def parser(start: str):
    """The LALR parser for ``filter`` or ``action`` (one each, so that a syntax error lists only
    what that kind of rule text could hold next); built once."""
    from lark import Lark

    return Lark(GRAMMAR, start=start, parser="lalr", lexer="contextual",
                propagate_positions=True, maybe_placeholders=True)
