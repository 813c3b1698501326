"""One write batch applied on its own: conditions, patches and per-record operations.

``Client.apply`` sends one batch on a Write stream of its own and returns
once it is durable. The conditions it carries are checked against the
state the batch starts from, atomically with its writes: if one fails,
nothing of the batch is applied and ``Aborted`` names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import grpc
from google.protobuf import any_pb2, json_format
from google.protobuf import message as _message

from protobase._keys import pack
from protobase._query import Where, select
from protobase._schema import TYPE_URL_PREFIX
from protobase.errors import WriteError, write_error, write_error_from_rpc
from protobase.v1 import protobase_pb2 as pb

if TYPE_CHECKING:
    from protobase._client import Client

#: The operations of one batch's records: the writer's four and "patch",
#: which sets the fields named in ``fields`` and adds those named in ``add``,
#: keeping everything else the stored record holds.
BatchOp = Literal["insert", "update", "upsert", "remove", "patch"]

OPS: dict[str, pb.WriteOp.ValueType] = {
    "insert": pb.WRITE_OP_INSERT,
    "update": pb.WRITE_OP_UPDATE,
    "upsert": pb.WRITE_OP_UPSERT,
    "remove": pb.WRITE_OP_REMOVE,
    "patch": pb.WRITE_OP_PATCH,
}

#: A record as writes take it: a message, an Any, or (with a type name) a
#: dict in protobuf's JSON mapping or the record's encoded bytes.
Record = _message.Message | any_pb2.Any | Mapping[str, Any] | bytes


def if_record(index: int, *, version: int | None = None, filter: str | None = None) -> pb.Condition:
    """Require the stored record with the key of the batch's record ``index``.

    ``version``: the stored record is at this version (0: it does not
    exist, as for an insert that must not replace). ``filter``: it exists
    and matches this text filter (``'balance >= 10'``). Give one or both.
    """
    if index < 0:
        raise ValueError(f"record index {index} is negative")
    c = pb.Condition(record=index)
    _record_checks(c, version, filter)
    return c


def if_key(
    record: _message.Message, *, version: int | None = None, filter: str | None = None
) -> pb.Condition:
    """Require the stored record with the primary key of ``record``.

    ``record`` is a message or ``Any`` of a record type of which only the
    primary-key fields are read; ``Client.key_record(type, key)`` builds one
    from a key as ``get`` takes it. The checks are those of ``if_record``.
    """
    if not isinstance(record, _message.Message):
        raise TypeError(f"if_key takes a record holding the key, not a {type(record).__name__}")
    c = pb.Condition()
    c.key.CopyFrom(pack(record))
    _record_checks(c, version, filter)
    return c


def if_query(
    query: pb.Query | str,
    where: Where = None,
    *,
    count: int | None = None,
    max_version: int | None = None,
    **query_options: Any,
) -> pb.Condition:
    """Require the matches of a query: their number and highest version.

    ``query`` is a ``select(...)`` or a type name with ``where`` and
    ``select``'s options (``limit`` applies). ``count``: the query matches
    this many records; ``max_version``: the highest version among them is
    this (0 when there are none). Give one or both; a write to any match,
    a new match or a match gone changes them.
    """
    if isinstance(query, pb.Query) and (where is not None or query_options):
        raise TypeError("give where and query options to select(), or a type name here")
    q = select(query, where, **query_options) if isinstance(query, str) else query
    if count is None and max_version is None:
        raise ValueError("a query condition needs count or max_version")
    c = pb.Condition()
    c.query.CopyFrom(q)
    if count is not None:
        c.count = count
    if max_version is not None:
        c.max_version = max_version
    return c


def _record_checks(c: pb.Condition, version: int | None, filter: str | None) -> None:
    if version is None and not filter:
        raise ValueError("a record or key condition needs version or filter")
    if version is not None:
        if version < 0:
            raise ValueError(f"version {version} is negative")
        c.version = version
    if filter:
        c.filter = filter


def to_any(client: Any, record: Record, type: str | None, index: int) -> any_pb2.Any:
    """Return a record as the Any a batch carries; a dict converts through the schema."""
    if isinstance(record, _message.Message):
        return pack(record)
    if isinstance(record, (bytes, Mapping)) and not type:
        raise TypeError("a dict or bytes record needs type= (the record type's full name)")
    assert type is not None
    if isinstance(record, bytes):
        return any_pb2.Any(type_url=TYPE_URL_PREFIX + type, value=record)
    if isinstance(record, Mapping):
        try:
            return pack(client.schema().from_dict(type, record))
        except (KeyError, json_format.ParseError) as e:
            reason = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
            raise write_error(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"record {index} of {type} not converted, nothing was sent: {reason}",
                record=index,
                type_url=TYPE_URL_PREFIX + type,
                reason=reason,
            ) from e
    raise TypeError(f"cannot write a {record.__class__.__name__} as a record")


def batch_request(
    client: Any,
    records: Iterable[Record],
    *,
    op: BatchOp | None,
    ops: Sequence[BatchOp] | None,
    type: str | None,
    conditions: Iterable[pb.Condition],
    fields: Iterable[str],
    add: Iterable[str],
) -> pb.WriteStreamRequest:
    """Return the one request of a batch (``client`` converts dicts through its schema)."""
    req = pb.WriteStreamRequest(ack=True, fields=fields, add=add, conditions=conditions)
    for i, r in enumerate(records):
        req.records.append(to_any(client, r, type, i))
    req.op = _batch_op(op, ops, len(req.records))
    if ops is not None:
        req.ops.extend(_op(o) for o in ops)
    return req


def batch_failure(e: grpc.RpcError, req: pb.WriteStreamRequest) -> WriteError:
    """Return the exception of a refused batch."""
    err = write_error_from_rpc(e)
    c = err.condition
    if c is not None and c < len(req.conditions) and not req.conditions[c].HasField("record"):
        err.record = None  # the server's 0 names no record of the batch
    return err


def no_answer() -> WriteError:
    """Return the exception of a batch's stream that ended without an answer."""
    return write_error(grpc.StatusCode.UNKNOWN, "the write stream ended without an answer")


def apply_batch(
    client: Client,
    records: Iterable[Record],
    *,
    op: BatchOp | None,
    ops: Sequence[BatchOp] | None,
    type: str | None,
    conditions: Iterable[pb.Condition],
    fields: Iterable[str],
    add: Iterable[str],
    timeout: float | None,
) -> int:
    """Send one batch on a Write stream of its own; return its durable position."""
    req = batch_request(
        client, records, op=op, ops=ops, type=type, conditions=conditions, fields=fields, add=add
    )
    call = client._write(iter([req.SerializeToString()]), timeout=timeout, metadata=client._md)
    try:
        resps = list(call)
    except grpc.RpcError as e:
        raise batch_failure(e, req) from None
    if not resps:
        raise no_answer()
    return resps[-1].position


def _op(name: str) -> pb.WriteOp.ValueType:
    v = OPS.get(name)
    if v is None:
        raise ValueError(f"unknown write operation {name!r}; want one of {sorted(OPS)}")
    return v


def _batch_op(op: BatchOp | None, ops: Sequence[BatchOp] | None, n: int) -> pb.WriteOp.ValueType:
    """Return the batch's own operation, which every request must name.

    With ``ops`` it is a patch when any record is one (the batch then
    carries ``fields`` and ``add``); a batch of conditions alone names
    upsert, which it does not use.
    """
    if ops is not None:
        if len(ops) != n:
            raise ValueError(f"ops names {len(ops)} operations for {n} records")
        if op is not None:
            raise ValueError("give op or ops, not both")
        return pb.WRITE_OP_PATCH if "patch" in ops else _op(ops[0]) if ops else pb.WRITE_OP_UPSERT
    if op is None:
        if n:
            raise ValueError("a batch of records needs op (or ops)")
        return pb.WRITE_OP_UPSERT
    return _op(op)
