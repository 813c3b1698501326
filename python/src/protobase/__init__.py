"""Python client of Protobase, the gRPC-native database.

Quick start::

    import protobase
    from protobase import eq, select

    with protobase.Client("127.0.0.1:7070") as db:
        db.apply_schema(["shop.proto"])
        with db.writer("insert") as w:
            w.write({"id": 1, "name": "Ann"}, type="shop.User")
        for r in db.search([select("shop.User", eq("id", 1))], decode="dict"):
            print(r.index, r.records)

The generated API modules are ``protobase.v1.protobase_pb2`` and
``protobase.v1.options_pb2`` (the import path protoc-generated schemas use).
"""

from protobase._client import TLS, Client, Key, QueryLike, Record, is_loopback, key_value
from protobase._errors import ProtobaseError, QueryError, WriteError
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
from protobase._reads import Decode, GetResult, Page, Scan, Search, SearchResult
from protobase._schema import Schema, read_proto_files, type_name
from protobase._watch import Change, ChangeOp, Position, Start, Watch, WatchOutOfRange
from protobase._writer import Op, WriteLimits, Writer, WriteResult

__all__ = [
    "TLS",
    "Change",
    "ChangeOp",
    "Client",
    "Decode",
    "Enum",
    "GetResult",
    "Key",
    "Op",
    "Page",
    "Position",
    "ProtobaseError",
    "QueryError",
    "QueryLike",
    "Record",
    "Scalar",
    "Scan",
    "Schema",
    "Search",
    "SearchResult",
    "Start",
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
    "in_",
    "is_loopback",
    "key_value",
    "le",
    "lt",
    "ne",
    "not_",
    "or_",
    "prefix",
    "read_proto_files",
    "select",
    "type_name",
    "value",
]
