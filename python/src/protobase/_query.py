"""Building queries: ``select`` and the expression helpers (``eq``, ``and_``...).

A filter is either an expression tree built with these helpers or a text
filter such as ``'age >= 30 and name prefix "An"'``, sent as is and parsed
by the server (the syntax of ``protobase search --where``; an error names
the column).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from protobase.v1 import protobase_pb2 as pb

_INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class Enum:
    """An enum operand given by its value name: ``eq("status", Enum("ACTIVE"))``."""

    name: str


#: A comparison operand. Python ints become int64 (uint64 above int64's
#: range), floats double, str string, bytes bytes, bool bool.
Scalar = bool | int | float | str | bytes | Enum

#: A filter: an expression tree, a text filter, or None for every record.
Where = pb.Expr | str | None


def value(v: Scalar) -> pb.Value:
    """Return the typed operand for a Python value."""
    out = pb.Value()
    _set(out, v)
    return out


# The builders below fill messages in place rather than passing messages to
# constructors, which copies them: a lookup query builds three times faster.
def _set(out: pb.Value, v: Scalar) -> None:
    if isinstance(v, bool):
        out.bool = v
    elif isinstance(v, int):
        if v > _INT64_MAX:
            out.uint = v
        else:
            out.int = v
    elif isinstance(v, float):
        out.double = v
    elif isinstance(v, str):
        out.string = v
    elif isinstance(v, bytes):
        out.bytes = v
    elif isinstance(v, Enum):
        out.enum = v.name
    else:
        raise TypeError(f"unsupported operand type {type(v).__name__}")


def _cmp(field: str, op: pb.Op.ValueType, v: Scalar) -> pb.Expr:
    e = pb.Expr()
    c = e.cmp
    c.field = field
    c.op = op
    _set(c.value, v)
    return e


def eq(field: str, v: Scalar) -> pb.Expr:
    """``field == v``."""
    return _cmp(field, pb.OP_EQ, v)


def ne(field: str, v: Scalar) -> pb.Expr:
    """``field != v``."""
    return _cmp(field, pb.OP_NE, v)


def lt(field: str, v: Scalar) -> pb.Expr:
    """``field < v``."""
    return _cmp(field, pb.OP_LT, v)


def le(field: str, v: Scalar) -> pb.Expr:
    """``field <= v``."""
    return _cmp(field, pb.OP_LE, v)


def gt(field: str, v: Scalar) -> pb.Expr:
    """``field > v``."""
    return _cmp(field, pb.OP_GT, v)


def ge(field: str, v: Scalar) -> pb.Expr:
    """``field >= v``."""
    return _cmp(field, pb.OP_GE, v)


def in_(field: str, values: Iterable[Scalar]) -> pb.Expr:
    """``field`` equals one of ``values``."""
    return pb.Expr(cmp=pb.Comparison(field=field, op=pb.OP_IN, values=[value(v) for v in values]))


def prefix(field: str, v: str | bytes) -> pb.Expr:
    """The string or bytes ``field`` starts with ``v``."""
    return _cmp(field, pb.OP_PREFIX, v)


def contains(field: str, v: str | bytes) -> pb.Expr:
    """The string or bytes ``field`` contains ``v``."""
    return _cmp(field, pb.OP_CONTAINS, v)


def and_(*exprs: pb.Expr) -> pb.Expr:
    """Every expression holds."""
    e = pb.Expr()
    getattr(e, "and").exprs.extend(exprs)  # "and" is a Python keyword
    return e


def or_(*exprs: pb.Expr) -> pb.Expr:
    """At least one expression holds."""
    e = pb.Expr()
    getattr(e, "or").exprs.extend(exprs)
    return e


def not_(expr: pb.Expr) -> pb.Expr:
    """The expression does not hold."""
    e = pb.Expr()
    getattr(e, "not").CopyFrom(expr)
    return e


def select(
    type: str,
    where: Where = None,
    *,
    limit: int = 0,
    order: str | None = None,
    descending: bool = False,
    keys_only: bool = False,
    count: bool = False,
    explain: bool = False,
    versions: bool = False,
) -> pb.Query:
    """Build a query of the record type ``type`` (its full name).

    ``where`` is an expression (``and_(eq("country", "NL"), ge("age", 30))``)
    or a text filter (``'country = "NL" and age >= 30'``) parsed by the
    server. ``order`` names an index to order by (None or ``"pk"``: the
    primary key); ``limit`` 0 means no limit; ``keys_only`` returns records
    holding only their primary key; ``count`` returns only the number of
    matches; ``explain`` attaches the server's plan; ``versions`` returns
    each record's version beside it (``SearchResult.versions``,
    ``Page.versions``, ``Scan.version``).
    """
    q = pb.Query(type=type)
    if limit:
        q.limit = limit
    if keys_only:
        q.keys_only = True
    if count:
        q.count = True
    if explain:
        q.explain = True
    if versions:
        q.versions = True
    if isinstance(where, str):
        q.filter = where
    elif where is not None:
        q.where.CopyFrom(where)
    if order and order != "pk":
        q.order.index = order
    if descending:
        q.order.descending = True
    return q
