"""The asyncio client: the API of ``protobase.Client`` on ``grpc.aio``."""

from __future__ import annotations

import functools
import os
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

import grpc
import grpc.aio
from google.protobuf import any_pb2
from google.protobuf import message as _message

from protobase._aggregate import Aggregation, aggregate_request, aggregation
from protobase._batch import BatchOp, Record, batch_failure, batch_request, no_answer
from protobase._channel import TLS, channel_options
from protobase._client import QueryLike, _as_query, _versioned
from protobase._keys import Key, get_request, key_record, take_get_response
from protobase._reads import (
    Decode,
    Decoder,
    GetResult,
    Page,
    SearchResult,
    Versioned,
    decoder,
    read_error,
    search_results,
)
from protobase._schema import Schema, read_proto_files, type_name
from protobase._transaction import BASE_DELAY, MAX_ATTEMPTS, MAX_DELAY
from protobase._watch import Resumer, Start, changes_request
from protobase._writer import Op, WriteLimits, WriteResult
from protobase.aio._reads import Scan, Search, Watch
from protobase.aio._transaction import Transaction, TransactionFn, transact
from protobase.aio._writer import Writer
from protobase.errors import from_rpc_error
from protobase.v1 import protobase_pb2 as pb

_SERVICE = "/protobase.v1.Protobase/"

T = TypeVar("T")
P = ParamSpec("P")


class _SchemaView:
    """The cached schema and registered classes, as the shared sync helpers read them.

    The helpers call ``schema()`` synchronously; the asyncio client fetches
    the schema first (``Client._ready``), so here it is only read.
    """

    def __init__(self, client: Client) -> None:
        self._client = client

    @property
    def _registered(self) -> dict[str, type[_message.Message]]:
        return self._client._registered

    def schema(self, *, refresh: bool = False) -> Schema:
        s = self._client._schema
        if s is None:
            raise RuntimeError("the schema was not fetched")  # the client fetches it first
        return s


class Client:
    """An asyncio connection to a Protobase server, on ``grpc.aio``.

    The same API as ``protobase.Client``, with coroutines for calls and
    async iterators for streams: ``async with protobase.aio.Client(addr) as
    db``, ``async with db.writer() as w: await w.write(...)``, ``async for
    r in db.search(...)``, ``scan``, ``pages`` and ``watch`` (which resumes
    on its own, as the sync one does), ``await db.transact(fn)`` for an
    ``async def fn(tx)``. Create it inside the running event loop.
    """

    def __init__(
        self,
        addr: str,
        api_key: str | None = None,
        tls: bool | TLS | grpc.ChannelCredentials | None = None,
        *,
        options: Iterable[tuple[str, Any]] = (),
    ) -> None:
        if api_key is None:
            api_key = os.environ.get("PROTOBASE_API_KEY") or None
        opts, creds = channel_options(addr, api_key, tls, options)
        if creds is None:
            self._channel = grpc.aio.insecure_channel(addr, options=opts)
        else:
            self._channel = grpc.aio.secure_channel(addr, creds, options=opts)
        self.addr = addr
        self._md: tuple[tuple[str, str], ...] = (
            (("authorization", "Bearer " + api_key),) if api_key else ()
        )
        self._schema: Schema | None = None
        self._limits: WriteLimits | None = None
        self._registered: dict[str, type[_message.Message]] = {}
        self._view = _SchemaView(self)
        ch = self._channel
        self._unary = {
            m: ch.unary_unary(_SERVICE + m, request_serializer=_ser, response_deserializer=resp)
            for m, resp in (
                ("ApplySchema", pb.ApplySchemaResponse.FromString),
                ("GetSchema", pb.GetSchemaResponse.FromString),
                ("Query", pb.QueryResponse.FromString),
                ("Get", pb.GetResponse.FromString),
                ("CreateKey", pb.CreateKeyResponse.FromString),
                ("ListKeys", pb.ListKeysResponse.FromString),
                ("RevokeKey", pb.RevokeKeyResponse.FromString),
            )
        }
        self._write: grpc.aio.StreamStreamMultiCallable[bytes, pb.WriteStreamResponse]
        self._write = ch.stream_stream(
            _SERVICE + "Write",
            request_serializer=None,
            response_deserializer=pb.WriteStreamResponse.FromString,
        )
        self._search = ch.stream_stream(
            _SERVICE + "Search",
            request_serializer=_ser,
            response_deserializer=pb.SearchResponse.FromString,
        )
        self._scan = ch.unary_stream(
            _SERVICE + "Scan",
            request_serializer=_ser,
            response_deserializer=pb.ScanResponse.FromString,
        )
        self._watch = ch.unary_stream(
            _SERVICE + "Watch",
            request_serializer=_ser,
            response_deserializer=pb.WatchResponse.FromString,
        )

    async def _call(self, method: str, req: _message.Message, timeout: float | None) -> Any:
        try:
            return await self._unary[method](req, timeout=timeout, metadata=self._md)
        except grpc.RpcError as e:
            raise (read_error(e) if method in ("Query", "Get") else from_rpc_error(e)) from None

    # ------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        """Close the connection."""
        await self._channel.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def channel(self) -> grpc.aio.Channel:
        """Return the gRPC channel, for calls this client does not wrap."""
        return self._channel

    # --------------------------------------------------------------- schema

    async def apply_schema(
        self,
        files: Mapping[str, str] | Iterable[str | os.PathLike[str]] = (),
        *,
        dry_run: bool = False,
        allow_drop: Iterable[str] = (),
        add: bool = False,
        remove: Iterable[str] = (),
        root: str | None = None,
        timeout: float | None = None,
    ) -> pb.ApplySchemaResponse:
        """Make ``files`` the whole schema, or with ``add`` add them (``Client.apply_schema``)."""
        if isinstance(files, Mapping):
            sources = dict(files)
        else:
            paths = list(files)
            sources = read_proto_files(paths, root) if paths else {}
        req = pb.ApplySchemaRequest(
            files=sources,
            dry_run=dry_run,
            allow_drop=list(allow_drop),
            mode=pb.SCHEMA_MODE_ADD if add else pb.SCHEMA_MODE_WHOLE,
            remove_files=list(remove),
        )
        resp: pb.ApplySchemaResponse = await self._call("ApplySchema", req, timeout)
        if resp.applied:
            self._schema = None
        return resp

    async def get_schema(self, *, timeout: float | None = None) -> pb.GetSchemaResponse:
        """Return the server's schema: sources, record types, descriptors, limits."""
        resp: pb.GetSchemaResponse = await self._call("GetSchema", pb.GetSchemaRequest(), timeout)
        wl = resp.write_limits
        self._limits = WriteLimits(
            wl.max_batch_records or WriteLimits.max_batch_records,
            wl.max_message_bytes or WriteLimits.max_message_bytes,
        )
        return resp

    async def schema(self, *, refresh: bool = False) -> Schema:
        """Return the server's schema as message classes (fetched once, then cached)."""
        if self._schema is None or refresh:
            self._schema = Schema(await self.get_schema())
        return self._schema

    async def write_limits(self) -> WriteLimits:
        """Return the server's write limits (from GetSchema, fetched once)."""
        if self._limits is None:
            await self.get_schema()
        assert self._limits is not None
        return self._limits

    def register(self, *classes: type[_message.Message] | types.ModuleType) -> None:
        """Make reads return records of these types as these classes (``Client.register``)."""
        for c in classes:
            if isinstance(c, types.ModuleType):
                desc = getattr(c, "DESCRIPTOR", None)
                if desc is None:
                    raise TypeError(f"module {c.__name__} is not a protoc-generated one")
                for name in desc.message_types_by_name:
                    cls = getattr(c, name)
                    self._registered[cls.DESCRIPTOR.full_name] = cls
            elif isinstance(c, type) and issubclass(c, _message.Message):
                self._registered[c.DESCRIPTOR.full_name] = c
            else:
                raise TypeError(f"register takes message classes or modules, not {c!r}")

    async def _ready(self, records: Iterable[any_pb2.Any] = ()) -> _SchemaView:
        """Fetch the schema unless it is cached and holds the type of every record."""
        s = self._schema
        if s is None or any(type_name(r.type_url) not in s.types for r in records):
            await self.schema(refresh=True)
        return self._view

    async def _decoder(self, decode: Decode, recs: list[any_pb2.Any]) -> Decoder:
        """Return the decoder of ``decode`` for recs, fetching the schema when it needs it."""
        if decode is None or decode == "any" or isinstance(decode, type):
            return decoder(self._view, decode)
        if decode == "auto" and all(type_name(r.type_url) in self._registered for r in recs):
            return decoder(self._view, decode)
        return decoder(await self._ready(recs), decode)

    async def _decode(self, decode: Decode, recs: list[any_pb2.Any]) -> list[Any]:
        """Decode records as ``decode`` asks, fetching the schema when it is needed."""
        return (await self._decoder(decode, recs))(recs)

    # --------------------------------------------------------------- writes

    def writer(
        self, op: Op = "insert", *, max_records: int = 1000, max_bytes: int = 0, linger: float = 0.0
    ) -> Writer:
        """Return a batching writer for op, used ``async with`` (``protobase.Client.writer``)."""
        return Writer(self, op, max_records=max_records, max_bytes=max_bytes, linger=linger)

    async def insert(self, records: Iterable[Record], type: str | None = None) -> WriteResult:
        """Insert records on one stream; every one is durable when this returns."""
        return await self._write_all("insert", records, type)

    async def update(self, records: Iterable[Record], type: str | None = None) -> WriteResult:
        """Replace existing records; a missing primary key is NOT_FOUND."""
        return await self._write_all("update", records, type)

    async def upsert(self, records: Iterable[Record], type: str | None = None) -> WriteResult:
        """Insert or replace records."""
        return await self._write_all("upsert", records, type)

    async def remove(self, records: Iterable[Record], type: str | None = None) -> WriteResult:
        """Delete the records with these primary keys."""
        return await self._write_all("remove", records, type)

    async def _write_all(self, op: Op, records: Iterable[Record], type: str | None) -> WriteResult:
        async with self.writer(op) as w:
            await w.write_many(records, type)
        return await w.close()

    async def apply(
        self,
        records: Iterable[Record] = (),
        *,
        op: BatchOp | None = None,
        ops: Sequence[BatchOp] | None = None,
        type: str | None = None,
        conditions: Iterable[pb.Condition] = (),
        fields: Iterable[str] = (),
        add: Iterable[str] = (),
        timeout: float | None = None,
    ) -> int:
        """Apply one batch atomically, if its conditions hold (``protobase.Client.apply``)."""
        recs = list(records)
        view = await self._ready() if any(isinstance(r, Mapping) for r in recs) else self._view
        req = batch_request(
            view, recs, op=op, ops=ops, type=type, conditions=conditions, fields=fields, add=add
        )
        call = self._write(timeout=timeout, metadata=self._md)
        try:
            await call.write(req.SerializeToString())
            await call.done_writing()
            resps = [r async for r in call]
        except grpc.RpcError as e:
            raise batch_failure(e, req) from None
        if not resps:
            raise no_answer()
        position: int = resps[-1].position
        return position

    async def patch(
        self,
        records: Iterable[Record],
        *,
        fields: Iterable[str] = (),
        add: Iterable[str] = (),
        type: str | None = None,
        conditions: Iterable[pb.Condition] = (),
        timeout: float | None = None,
    ) -> int:
        """Change some fields of existing records in one batch (``protobase.Client.patch``)."""
        return await self.apply(
            records,
            op="patch",
            type=type,
            conditions=conditions,
            fields=fields,
            add=add,
            timeout=timeout,
        )

    async def key_record(self, type: str, key: Key) -> any_pb2.Any:
        """Return a record of ``type`` holding only ``key``: ``if_key``'s."""
        return key_record(await self.schema(), type, key)

    def transaction(self, *, timeout: float | None = None) -> Transaction:
        """Begin a transaction committed at the end of an ``async with`` block, never retried."""
        return Transaction(self, timeout)

    async def transact(
        self,
        fn: TransactionFn[T],
        *,
        max_attempts: int = MAX_ATTEMPTS,
        base_delay: float = BASE_DELAY,
        max_delay: float = MAX_DELAY,
        timeout: float | None = None,
    ) -> T:
        """Run ``await fn(tx)`` and commit it, again while the commit conflicts (see ``Client``)."""
        return await transact(
            self,
            fn,
            max_attempts=max_attempts,
            base_delay=base_delay,
            max_delay=max_delay,
            timeout=timeout,
        )

    @overload
    def transactional(
        self, fn: Callable[Concatenate[Transaction, P], Awaitable[T]], /
    ) -> Callable[P, Awaitable[T]]: ...

    @overload
    def transactional(
        self,
        /,
        *,
        max_attempts: int = ...,
        base_delay: float = ...,
        max_delay: float = ...,
        timeout: float | None = ...,
    ) -> Callable[
        [Callable[Concatenate[Transaction, P], Awaitable[T]]], Callable[P, Awaitable[T]]
    ]: ...

    def transactional(
        self,
        fn: Callable[Concatenate[Transaction, P], Awaitable[T]] | None = None,
        /,
        *,
        max_attempts: int = MAX_ATTEMPTS,
        base_delay: float = BASE_DELAY,
        max_delay: float = MAX_DELAY,
        timeout: float | None = None,
    ) -> Any:
        """Decorate ``async def fn(tx, *args)`` to run as ``transact`` runs it: ``await fn(*args)``.

        ``@db.transactional`` or ``@db.transactional(max_attempts=20)``.
        """

        def wrap(
            f: Callable[Concatenate[Transaction, P], Awaitable[T]],
        ) -> Callable[P, Awaitable[T]]:
            @functools.wraps(f)
            async def run(*args: P.args, **kwargs: P.kwargs) -> T:
                return await self.transact(
                    lambda tx: f(tx, *args, **kwargs),
                    max_attempts=max_attempts,
                    base_delay=base_delay,
                    max_delay=max_delay,
                    timeout=timeout,
                )

            return run

        return wrap if fn is None else wrap(fn)

    # ---------------------------------------------------------------- reads

    async def search(
        self,
        queries: Iterable[pb.Query],
        *,
        batch_size: int = 1000,
        decode: Decode = "auto",
        versions: bool = False,
        timeout: float | None = None,
    ) -> AsyncIterator[SearchResult]:
        """Run many queries on one Search stream; yield each one's results as it finishes."""
        qs = [_versioned(q) if versions else q for q in queries]
        n = max(1, batch_size)
        reqs = [pb.SearchRequest(queries=qs[i : i + n]) for i in range(0, len(qs), n)]
        call = self._search(iter(reqs), timeout=timeout, metadata=self._md)
        pending: dict[int, SearchResult] = {}
        try:
            async for resp in call:
                recs = [r for b in resp.results for r in b.records]
                dec = await self._decoder(decode, recs) if recs else None
                for r in search_results(resp, pending, dec):
                    yield r
        except grpc.RpcError as e:
            raise read_error(e) from None

    def open_search(self, *, decode: Decode = "auto", timeout: float | None = None) -> Search:
        """Open a Search stream to send batches of queries to as they come."""
        call = self._search(timeout=timeout, metadata=self._md)
        return Search(call, lambda recs: self._decoder(decode, recs))

    def scan(
        self,
        query: QueryLike,
        where: Any = None,
        *,
        parallelism: int = 1,
        batch_size: int = 0,
        decode: Decode = "auto",
        versions: bool = False,
        timeout: float | None = None,
        **query_options: Any,
    ) -> Scan:
        """Stream every match of one query: ``async for r in db.scan(...)``."""
        q = _as_query(query, where, query_options, versions)
        req = pb.ScanRequest(query=q, parallelism=parallelism, batch_size=batch_size)
        call = self._scan(req, timeout=timeout, metadata=self._md)
        return Scan(call, lambda recs: self._decode(decode, recs))

    async def query(
        self,
        query: QueryLike,
        where: Any = None,
        *,
        page_size: int = 0,
        page_token: str = "",
        decode: Decode = "auto",
        versions: bool = False,
        timeout: float | None = None,
        **query_options: Any,
    ) -> Page:
        """Fetch one page of a query; pass its ``next_page_token`` for the next."""
        q = _as_query(query, where, query_options, versions)
        req = pb.QueryRequest(query=q, page_size=page_size, page_token=page_token)
        resp: pb.QueryResponse = await self._call("Query", req, timeout)
        return Page(
            records=await self._decode(decode, list(resp.records)),
            next_page_token=resp.next_page_token,
            plan=resp.plan if resp.HasField("plan") else None,
            count=resp.count,
            versions=list(resp.versions),
        )

    async def pages(
        self,
        query: QueryLike,
        where: Any = None,
        *,
        page_size: int = 0,
        decode: Decode = "auto",
        versions: bool = False,
        timeout: float | None = None,
        **query_options: Any,
    ) -> AsyncIterator[Page]:
        """Yield every page of a query in order, following the tokens."""
        q = _as_query(query, where, query_options, versions)
        token = ""
        while True:
            page = await self.query(
                q, page_size=page_size, page_token=token, decode=decode, timeout=timeout
            )
            yield page
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def aggregate(
        self,
        query: QueryLike,
        where: Any = None,
        *,
        group_by: Sequence[str] = (),
        functions: str | Sequence[str] = "count()",
        explain: bool = False,
        timeout: float | None = None,
    ) -> Aggregation:
        """Aggregate a query's matches by group (``protobase.Client.aggregate``)."""
        req, fns = aggregate_request(_as_query(query, where, {}), group_by, functions, explain)
        resp: pb.QueryResponse = await self._call("Query", req, timeout)
        return aggregation(resp, group_by, fns)

    async def get(
        self,
        type: str,
        keys: Iterable[Key],
        *,
        decode: Decode = "auto",
        versions: bool = False,
        timeout: float | None = None,
    ) -> GetResult:
        """Read records of ``type`` by primary key, on one snapshot (``Client.get``)."""
        given = list(keys)
        found = await self._lookup(type, given, versions, timeout)
        order = sorted(found)
        missing = [i for i in range(len(given)) if i not in found]
        return GetResult(
            await self._decode(decode, [found[i][0] for i in order]),
            missing,
            [found[i][1] for i in order] if versions else [],
            [given[i] for i in missing],
        )

    async def get_versioned(
        self,
        type: str,
        keys: Iterable[Key],
        *,
        decode: Decode = "auto",
        timeout: float | None = None,
    ) -> list[Versioned]:
        """Read records by primary key with their versions, parallel to ``keys``."""
        given = list(keys)
        found = await self._lookup(type, given, True, timeout)
        order = sorted(found)
        recs = await self._decode(decode, [found[i][0] for i in order])
        decoded = dict(zip(order, recs, strict=True))
        return [
            Versioned(decoded[i], found[i][1]) if i in found else Versioned(None, 0)
            for i in range(len(given))
        ]

    async def _lookup(
        self, type: str, keys: list[Key], versions: bool, timeout: float | None
    ) -> dict[int, tuple[any_pb2.Any, int]]:
        found: dict[int, tuple[any_pb2.Any, int]] = {}
        todo = list(range(len(keys)))
        while todo:
            req, order = get_request(type, keys, todo, versions)
            resp: pb.GetResponse = await self._call("Get", req, timeout)
            todo = take_get_response(type, resp, order, todo, found)
        return found

    def watch(
        self,
        types: str | Iterable[str],
        where: Any = None,
        *,
        start: Start = "now",
        old_records: bool = False,
        batch_size: int | None = None,
        decode: Decode = "auto",
        timeout: float | None = None,
        resume: bool = True,
        resume_timeout: float | None = None,
    ) -> Watch:
        """Stream committed changes: ``async for c in db.watch(...)`` (``Client.watch``).

        It resumes on its own after a transport failure or a server restart,
        as the sync watch does.
        """
        names = [types] if isinstance(types, str) else list(types)
        req = changes_request(names, where, start, old_records, batch_size)

        def open_call(r: pb.WatchRequest, t: float | None) -> Any:
            return self._watch(r, timeout=t, metadata=self._md)

        async def dec(recs: list[any_pb2.Any]) -> list[Any]:
            return await self._decode(decode, recs)

        return Watch(open_call, dec, Resumer(req, resume, resume_timeout), timeout)

    # ----------------------------------------------------------------- keys

    async def create_key(
        self, name: str, role: str, types: Iterable[str] = (), *, timeout: float | None = None
    ) -> str:
        """Create an API key (admin key needed) and return it."""
        r = pb.KeyRole.Value("KEY_ROLE_" + role.upper())
        req = pb.CreateKeyRequest(name=name, role=r, types=list(types))
        resp: pb.CreateKeyResponse = await self._call("CreateKey", req, timeout)
        return resp.key

    async def list_keys(self, *, timeout: float | None = None) -> list[pb.KeyInfo]:
        """List the API keys (names, roles, scopes; never the keys)."""
        resp: pb.ListKeysResponse = await self._call("ListKeys", pb.ListKeysRequest(), timeout)
        return list(resp.keys)

    async def revoke_key(self, name: str, *, timeout: float | None = None) -> None:
        """Revoke the API key ``name``."""
        await self._call("RevokeKey", pb.RevokeKeyRequest(name=name), timeout)


def _ser(m: _message.Message) -> bytes:
    return m.SerializeToString()
