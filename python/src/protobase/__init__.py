"""Python client of Protobase, the gRPC-native database.

Quick start::

    import protobase
    from protobase import eq, select

    with protobase.Client("127.0.0.1:7070") as db:
        db.apply_schema(["shop.proto"])
        with db.writer("insert") as w:
            w.write({"id": 1, "name": "Ann"}, type="shop.User")
        for r in db.search([select("shop.User", eq("id", 1))]):
            print(r.index, r.records)

        # Optimistic transactions: reads record what they saw, the writes
        # commit as one batch on condition that none of it changed, and a
        # conflict runs the function again.
        @db.transactional
        def rename(tx: protobase.Transaction, id: int, name: str) -> None:
            user = tx.get("shop.User", id)
            tx.update({**user, "name": name}, type="shop.User")

        rename(1, "Anna")

Reads return dicts, or instances of the classes given to
``Client.register`` (``decode=`` chooses otherwise). Failures raise a
``ProtobaseError`` of the class of their status (``NotFound``,
``Aborted``, ...; see ``protobase.errors``). ``protobase.aio`` is the same
API for asyncio.

The generated API modules are ``protobase.v1.protobase_pb2`` and
``protobase.v1.options_pb2`` (the import path protoc-generated schemas use).
"""

from protobase._aggregate import Aggregation, AggValue, parse_functions
from protobase._batch import BatchOp, Record, if_key, if_query, if_record
from protobase._channel import TLS, is_loopback
from protobase._client import Client, QueryLike
from protobase._keys import Key, key_value
from protobase._query import (
    Enum,
    Scalar,
    Where,
    and_,
    contains,
    eq,
    ge,
    gt,
    in_,
    le,
    lt,
    ne,
    not_,
    or_,
    prefix,
    select,
    value,
)
from protobase._reads import Decode, GetResult, Page, Scan, Search, SearchResult, Versioned
from protobase._schema import Schema, read_proto_files, type_name
from protobase._transaction import Transaction
from protobase._watch import (
    RESUME_BASE_DELAY,
    RESUME_MAX_DELAY,
    RESUME_TIMEOUT,
    Change,
    ChangeOp,
    Position,
    Start,
    Watch,
)
from protobase._writer import Op, WriteLimits, Writer, WriteResult
from protobase.errors import (
    Aborted,
    AlreadyExists,
    ConflictError,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ProtobaseError,
    QueryError,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    WatchOutOfRange,
    WriteError,
)

__all__ = [
    "RESUME_BASE_DELAY",
    "RESUME_MAX_DELAY",
    "RESUME_TIMEOUT",
    "TLS",
    "Aborted",
    "AggValue",
    "Aggregation",
    "AlreadyExists",
    "BatchOp",
    "Change",
    "ChangeOp",
    "Client",
    "ConflictError",
    "DeadlineExceeded",
    "Decode",
    "Enum",
    "FailedPrecondition",
    "GetResult",
    "Internal",
    "InvalidArgument",
    "Key",
    "NotFound",
    "Op",
    "OutOfRange",
    "Page",
    "PermissionDenied",
    "Position",
    "ProtobaseError",
    "QueryError",
    "QueryLike",
    "Record",
    "ResourceExhausted",
    "Scalar",
    "Scan",
    "Schema",
    "Search",
    "SearchResult",
    "Start",
    "Transaction",
    "Unauthenticated",
    "Unavailable",
    "Versioned",
    "Watch",
    "WatchOutOfRange",
    "Where",
    "WriteError",
    "WriteLimits",
    "WriteResult",
    "Writer",
    "and_",
    "contains",
    "eq",
    "ge",
    "gt",
    "if_key",
    "if_query",
    "if_record",
    "in_",
    "is_loopback",
    "key_value",
    "le",
    "lt",
    "ne",
    "not_",
    "or_",
    "parse_functions",
    "prefix",
    "read_proto_files",
    "select",
    "type_name",
    "value",
]
