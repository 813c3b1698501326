"""Aggregates: count, sum, min, max and avg of a query's matches, by group."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf import struct_pb2

from protobase.v1 import protobase_pb2 as pb

#: One value of an aggregate row: a group's field value or a function's
#: result. Integers beyond 2**53 in magnitude come as decimal strings, bytes
#: as base64, enums by name, timestamps as RFC 3339 text; absent is None.
AggValue = None | bool | int | float | str

_OPS = {
    "count": pb.AGGREGATE_OP_COUNT,
    "sum": pb.AGGREGATE_OP_SUM,
    "min": pb.AGGREGATE_OP_MIN,
    "max": pb.AGGREGATE_OP_MAX,
    "avg": pb.AGGREGATE_OP_AVG,
}


@dataclass
class Aggregation:
    """The answer of ``Client.aggregate``.

    ``rows`` holds one dict per group, ordered by group values: the group's
    fields by name, then each function by its text (``"count()"``,
    ``"sum(score)"``), as ``protobase query --agg`` prints them.
    """

    rows: list[dict[str, AggValue]]
    plan: pb.Plan | None


def parse_functions(functions: str | Sequence[str]) -> list[pb.AggregateFunction]:
    """Parse ``"count(),sum(score)"`` (or a list of such items) into functions."""
    items = functions.split(",") if isinstance(functions, str) else list(functions)
    out: list[pb.AggregateFunction] = []
    for raw in items:
        item = raw.strip()
        name, paren, rest = item.partition("(")
        op = _OPS.get(name.strip().lower())
        if not paren or not rest.endswith(")") or op is None:
            raise ValueError(
                f"aggregate {item!r}: want count(), count(field), sum, min, max or avg of a field"
            )
        out.append(pb.AggregateFunction(op=op, field=rest[:-1].strip()))
    return out


def function_name(f: pb.AggregateFunction) -> str:
    """The text of a function as ``parse_functions`` reads it: ``"sum(score)"``."""
    for name, op in _OPS.items():
        if op == f.op:
            return f"{name}({f.field})"
    return f"{f.op}({f.field})"


def _value(v: struct_pb2.Value, as_float: bool) -> AggValue:
    kind = v.WhichOneof("kind")
    if kind == "number_value":
        x = v.number_value
        return int(x) if not as_float and x.is_integer() else x
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    return None


def rows_of(
    resp: pb.QueryResponse, group_by: Sequence[str], fns: Sequence[pb.AggregateFunction]
) -> list[dict[str, AggValue]]:
    """The rows of an aggregate QueryResponse as dicts (see Aggregation)."""
    names = [function_name(f) for f in fns]
    rows: list[dict[str, AggValue]] = []
    for r in resp.rows:
        row: dict[str, AggValue] = {}
        for name, v in zip(group_by, r.group, strict=False):
            row[name] = _value(v, False)
        for name, f, v in zip(names, fns, r.values, strict=False):
            row[name] = _value(v, f.op == pb.AGGREGATE_OP_AVG)
        rows.append(row)
    return rows


def aggregate_request(
    query: pb.Query, group_by: Sequence[str], functions: str | Sequence[str], explain: bool
) -> tuple[pb.QueryRequest, list[pb.AggregateFunction]]:
    """The QueryRequest asking for the aggregates of query, and its functions."""
    fns = parse_functions(functions)
    q = pb.Query()
    q.CopyFrom(query)
    q.explain = q.explain or explain
    q.aggregate.CopyFrom(pb.Aggregate(group_by=list(group_by), functions=fns))
    return pb.QueryRequest(query=q), fns


def aggregation(
    resp: pb.QueryResponse, group_by: Sequence[str], fns: Sequence[pb.AggregateFunction]
) -> Aggregation:
    """The Aggregation a QueryResponse answers."""
    return Aggregation(
        rows=rows_of(resp, group_by, fns),
        plan=resp.plan if resp.HasField("plan") else None,
    )
