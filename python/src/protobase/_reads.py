"""Reads: a multiplexed Search stream, a parallel Scan, Query pages.

Records come back as the server stored them (``google.protobuf.Any``) and
are decoded as ``decode`` asks: by default into the class registered for
their type (``Client.register``), else into dicts.
A query or get asking for ``versions`` gets each record's version beside
it: a list parallel to the records (``versions``), or ``Versioned`` pairs.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import grpc
from google.protobuf import any_pb2
from google.protobuf import message as _message

from protobase._schema import Schema, type_name
from protobase.errors import QueryError, query_error, query_error_from_rpc, status_code
from protobase.v1 import protobase_pb2 as pb

if TYPE_CHECKING:
    from protobase._client import Client

#: How records are returned: ``"auto"`` (the default) as instances of the
#: class registered for their type with ``Client.register`` (a
#: protoc-generated one), and records of other types as dicts; ``"dict"``
#: as dicts (proto field names, enums by name, defaults left out);
#: ``"message"`` as instances of the server schema's classes (built from
#: GetSchema, no protoc needed); ``"any"`` (or None) as stored,
#: ``google.protobuf.Any``; or a message class to parse every record into.
Decode = str | type[_message.Message] | None

Decoder = Callable[[list[any_pb2.Any]], list[Any]]


class SchemaSource(Protocol):
    """What decoding reads of a client: its schema and its registered classes."""

    @property
    def _registered(self) -> dict[str, type[_message.Message]]: ...

    def schema(self, *, refresh: bool = False) -> Schema:
        """Return the schema, fetched again with ``refresh``."""
        ...


def _as_stored(recs: list[any_pb2.Any]) -> list[Any]:
    return recs


def decoder(client: SchemaSource, decode: Decode) -> Decoder:
    """Return the function that turns a list of records into what ``decode`` asks."""
    if decode is None or decode == "any":
        return _as_stored
    if decode == "auto":
        return functools.partial(_auto, client)
    if decode == "message":
        return lambda recs: [_schema_for(client, r).decode(r) for r in recs]
    if decode == "dict":
        return lambda recs: [_schema_for(client, r).to_dict(r) for r in recs]
    if isinstance(decode, type) and issubclass(decode, _message.Message):
        cls = decode
        return lambda recs: [cls.FromString(r.value) for r in recs]
    raise ValueError(
        "decode must be 'auto', 'dict', 'message', 'any' (or None) or a message class, "
        f"not {decode!r}"
    )


def _auto(client: SchemaSource, recs: list[any_pb2.Any]) -> list[Any]:
    """Decode each record into its registered class, or else into a dict."""
    classes = client._registered
    out: list[Any] = []
    for r in recs:
        cls = classes.get(type_name(r.type_url)) if classes else None
        if cls is not None:
            out.append(cls.FromString(r.value))
        else:
            out.append(_schema_for(client, r).to_dict(r))
    return out


def _schema_for(client: SchemaSource, record: any_pb2.Any) -> Schema:
    """Return a schema holding the record's type, fetching a new one if the cached one does not.

    A type applied after the client fetched its schema (by another
    program) is then found instead of failing the read.
    """
    schema = client.schema()
    if type_name(record.type_url) not in schema.types:
        schema = client.schema(refresh=True)
    return schema


class Versioned(NamedTuple):
    """A record and its version, as ``get_versioned`` and ``Scan.versioned`` return them.

    A version is a number that changes whenever the record is written and
    grows over time: the commit of that write's acknowledgement
    (``WriteResult.position``) and Watch position. ``record`` is None and
    ``version`` 0 for a key that has no record.
    """

    record: Any
    version: int


@dataclass(slots=True)
class SearchResult:
    """The results of one query of a ``search`` call.

    ``index`` is the query's position in the list given to ``search``.
    ``error`` is set (and ``records`` empty) when the query failed; other
    queries are not affected.
    """

    index: int
    records: list[Any] = field(default_factory=list)
    #: Matches returned (or counted, for a count query).
    count: int = 0
    plan: pb.Plan | None = None
    error: QueryError | None = None
    #: With ``versions``: the version of each record, parallel to ``records``.
    versions: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Report whether the query succeeded."""
        return self.error is None


class Search:
    """An open Search stream: many queries in flight, results by query.

    ``send`` sends a batch of queries in one request and returns their
    indexes; ``results`` yields each query's ``SearchResult`` as it
    finishes, until every query sent before ``close`` has finished. Sending
    and receiving may happen on different threads.
    """

    def __init__(
        self, client: Client, decode: Decode = "auto", timeout: float | None = None
    ) -> None:
        dec = decoder(client, decode)
        self._decode = None if dec is _as_stored else dec
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[pb.SearchRequest] = []
        self._closed = False
        self._ended = False
        self._next = 0
        self._call = client._search_stub(self._requests(), timeout=timeout, metadata=client._md)

    def _requests(self) -> Iterator[pb.SearchRequest]:
        while True:
            with self._cond:
                while not self._queue and not self._closed and not self._ended:
                    self._cond.wait()
                if not self._queue:
                    return
                req = self._queue.pop(0)
            yield req

    def send(self, queries: Iterable[pb.Query]) -> range:
        """Send queries in one request; return their indexes on the stream."""
        req = pb.SearchRequest(queries=queries)
        with self._cond:
            if self._closed:
                raise ValueError("the search stream is closed for sending")
            first = self._next
            self._next += len(req.queries)
            self._queue.append(req)
            self._cond.notify_all()
        return range(first, first + len(req.queries))

    def close(self) -> None:
        """Send no more queries; ``results`` ends once the sent ones finish."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def cancel(self) -> None:
        """Abandon the stream and every query in flight."""
        self.close()
        self._call.cancel()

    def results(self) -> Iterator[SearchResult]:
        """Yield each query's results as it finishes (raises ``QueryError`` if the stream fails)."""
        pending: dict[int, SearchResult] = {}
        decode = self._decode
        try:
            for resp in self._call:
                yield from search_results(resp, pending, decode)
        except grpc.RpcError as e:
            raise read_error(e) from None
        finally:
            with self._cond:
                self._ended = True
                self._cond.notify_all()


def search_results(
    resp: pb.SearchResponse, pending: dict[int, SearchResult], decode: Decoder | None
) -> Iterator[SearchResult]:
    """Add a Search response's records to ``pending``; yield the queries it finishes."""
    for b in resp.results:
        r = pending.get(b.query)
        if r is None:
            r = pending[b.query] = SearchResult(b.query)
        if decode is None:
            r.records.extend(b.records)
        else:
            r.records.extend(decode(list(b.records)))
        r.versions.extend(b.versions)
        if b.HasField("plan"):
            r.plan = b.plan
    for d in resp.done:
        r = pending.pop(d.query, None) or SearchResult(d.query)
        r.count = d.count
        if d.HasField("plan"):
            r.plan = d.plan
        yield r
    for e in resp.errors:
        pending.pop(e.query, None)
        err = query_error(
            status_code(e.code),
            e.message,
            query=e.query,
            field=e.field or None,
            reason=e.message,
        )
        yield SearchResult(e.query, error=err)


class Scan:
    """Iterates over every match of one Scan; ``count`` and ``plan`` are set at the end.

    With ``versions``, ``version`` is the version of the record returned
    last, and ``versioned()`` iterates over ``Versioned`` pairs instead.
    """

    def __init__(self, call: Any, decode: Decoder) -> None:
        self._call = call
        self._decode = decode
        self._records: Iterator[Any] = iter(())
        self._versions: Iterator[int] = iter(())
        self._done = False
        #: Total matches, set when iteration ends.
        self.count = 0
        #: The plan, when the query asked for explain.
        self.plan: pb.Plan | None = None
        #: The version of the record returned last (0 without ``versions``).
        self.version = 0

    def __iter__(self) -> Scan:
        return self

    def versioned(self) -> Iterator[Versioned]:
        """Yield each remaining match with its version (the query must ask for versions)."""
        for r in self:
            yield Versioned(r, self.version)

    def __next__(self) -> Any:
        while True:
            for r in self._records:
                self.version = next(self._versions, 0)
                return r
            if self._done:
                raise StopIteration
            try:
                resp = next(self._call)
            except StopIteration:
                raise query_error(
                    grpc.StatusCode.UNKNOWN, "scan ended without its last message"
                ) from None
            except grpc.RpcError as e:
                raise read_error(e) from None
            if resp.HasField("plan"):
                self.plan = resp.plan
            if resp.done:
                self._done = True
                self.count = resp.count
            self._records = iter(self._decode(list(resp.records)))
            self._versions = iter(resp.versions)

    def close(self) -> None:
        """Stop the scan early."""
        self._call.cancel()

    def __enter__(self) -> Scan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Page:
    """One page of a Query; pass ``next_page_token`` to get the next."""

    records: list[Any]
    #: Empty on the last page.
    next_page_token: str
    plan: pb.Plan | None
    #: The number of matches of a count query (answered in one page).
    count: int
    #: With ``versions``: the version of each record, parallel to ``records``.
    versions: list[int] = field(default_factory=list)


def read_error(e: grpc.RpcError) -> QueryError:
    """Turn a failed read call into a QueryError."""
    return query_error_from_rpc(e)


@dataclass
class GetResult:
    """The answer of ``Client.get``: the records found, in the order of their keys.

    ``missing`` holds the positions (in the keys given) of the keys that
    have no record, ascending, and ``missing_keys`` those keys themselves,
    as given, in the same order. With ``versions``, ``versions`` holds each
    record's version, parallel to ``records``.
    """

    records: list[Any]
    missing: list[int]
    versions: list[int] = field(default_factory=list)
    missing_keys: list[Any] = field(default_factory=list)
