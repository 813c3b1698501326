"""The client: a connection to one server and every call of the API."""

from __future__ import annotations

import functools
import os
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

import grpc
from google.protobuf import any_pb2
from google.protobuf import message as _message

from protobase._aggregate import Aggregation, aggregate_request, aggregation
from protobase._batch import BatchOp, Record, apply_batch
from protobase._channel import TLS, channel_options
from protobase._keys import Key, get_request, key_record, take_get_response
from protobase._query import Where, select
from protobase._reads import (
    Decode,
    GetResult,
    Page,
    Scan,
    Search,
    SearchResult,
    Versioned,
    decoder,
    read_error,
)
from protobase._schema import Schema, read_proto_files
from protobase._transaction import BASE_DELAY, MAX_ATTEMPTS, MAX_DELAY, Transaction, transact
from protobase._watch import Resumer, Start, Watch, changes_request
from protobase._writer import Op, WriteLimits, Writer, WriteResult
from protobase.errors import from_rpc_error
from protobase.v1 import protobase_pb2 as pb

_SERVICE = "/protobase.v1.Protobase/"

T = TypeVar("T")
P = ParamSpec("P")

#: A query: a built one (``select``) or a record type's full name, whose
#: other parts are then given as keyword arguments.
QueryLike = pb.Query | str


class Client:
    """A connection to a Protobase server; safe for concurrent use.

    ``Client("127.0.0.1:7070")`` connects in plaintext; ``tls=True`` trusts
    the system's roots, ``tls=TLS(ca="ca.pem")`` a CA of your own.
    ``api_key`` (default ``$PROTOBASE_API_KEY``) is sent as ``authorization:
    Bearer KEY`` on every call; over plaintext only to a loopback address,
    so that a key never crosses a network in the clear.
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
            self._channel = grpc.insecure_channel(addr, options=opts)
        else:
            self._channel = grpc.secure_channel(addr, creds, options=opts)
        self.addr = addr
        self._md: tuple[tuple[str, str], ...] = (
            (("authorization", "Bearer " + api_key),) if api_key else ()
        )
        self._schema: Schema | None = None
        self._limits: WriteLimits | None = None
        self._registered: dict[str, type[_message.Message]] = {}
        self._bind(self._channel)

    def _bind(self, ch: grpc.Channel) -> None:
        """Make the callables of the API's methods on channel ch."""
        self._apply = _unary(ch, "ApplySchema", pb.ApplySchemaRequest, pb.ApplySchemaResponse)
        self._get_schema = _unary(ch, "GetSchema", pb.GetSchemaRequest, pb.GetSchemaResponse)
        self._query = _unary(ch, "Query", pb.QueryRequest, pb.QueryResponse)
        self._get = _unary(ch, "Get", pb.GetRequest, pb.GetResponse)
        self._create_key = _unary(ch, "CreateKey", pb.CreateKeyRequest, pb.CreateKeyResponse)
        self._list_keys = _unary(ch, "ListKeys", pb.ListKeysRequest, pb.ListKeysResponse)
        self._revoke_key = _unary(ch, "RevokeKey", pb.RevokeKeyRequest, pb.RevokeKeyResponse)
        self._write: grpc.StreamStreamMultiCallable[bytes, pb.WriteStreamResponse]
        self._write = ch.stream_stream(
            _SERVICE + "Write",
            request_serializer=None,  # the writer sends encoded requests
            response_deserializer=pb.WriteStreamResponse.FromString,
        )
        self._search_stub = ch.stream_stream(
            _SERVICE + "Search",
            request_serializer=pb.SearchRequest.SerializeToString,
            response_deserializer=pb.SearchResponse.FromString,
        )
        self._scan = ch.unary_stream(
            _SERVICE + "Scan",
            request_serializer=pb.ScanRequest.SerializeToString,
            response_deserializer=pb.ScanResponse.FromString,
        )
        self._watch = ch.unary_stream(
            _SERVICE + "Watch",
            request_serializer=pb.WatchRequest.SerializeToString,
            response_deserializer=pb.WatchResponse.FromString,
        )

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connection."""
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def channel(self) -> grpc.Channel:
        """Return the gRPC channel, for calls this client does not wrap."""
        return self._channel

    # --------------------------------------------------------------- schema

    def apply_schema(
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
        """Make ``files`` the whole schema, or with ``add`` add them; return the plan.

        ``files`` maps import paths to .proto sources, or lists .proto
        files and directories, read as ``protobase schema apply`` reads
        them (import paths relative to ``root``, or to each file's own
        directory). Without ``add`` they are the whole schema: files
        applied before and missing now are removed. With ``add`` each is
        added or replaces the file of its import path, every other file
        is kept, and ``remove`` names files to remove by import path.

        Nothing is dropped by omission: a record type (``"shop.User"``,
        deleting its records) or an index (``"shop.User.email"``) that the
        new schema no longer declares is refused unless named in
        ``allow_drop``; the refusal (FAILED_PRECONDITION) names each one.
        The plan lists ``types_dropped`` and ``indexes_dropped``. With
        ``dry_run`` the server only plans. A schema that does not compile
        raises ``ProtobaseError`` (INVALID_ARGUMENT) listing every problem
        as file:line:col.
        """
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
        try:
            resp: pb.ApplySchemaResponse = self._apply(req, timeout=timeout, metadata=self._md)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        if resp.applied:
            self._schema = None
        return resp

    def get_schema(self, *, timeout: float | None = None) -> pb.GetSchemaResponse:
        """Return the server's schema: sources, record types, descriptors, limits."""
        try:
            resp: pb.GetSchemaResponse = self._get_schema(
                pb.GetSchemaRequest(), timeout=timeout, metadata=self._md
            )
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        wl = resp.write_limits
        self._limits = WriteLimits(
            wl.max_batch_records or WriteLimits.max_batch_records,
            wl.max_message_bytes or WriteLimits.max_message_bytes,
        )
        return resp

    def schema(self, *, refresh: bool = False) -> Schema:
        """Return the server's schema as message classes (fetched once, then cached).

        ``apply_schema`` forgets the cached one; ``refresh`` fetches it again.
        """
        if self._schema is None or refresh:
            self._schema = Schema(self.get_schema())
        return self._schema

    def register(self, *classes: type[_message.Message] | types.ModuleType) -> None:
        """Make reads return records of these types as these classes (``decode="auto"``).

        Each argument is a protoc-generated message class
        (``shop_pb2.User``) or a whole generated module (``shop_pb2``: each
        of its top-level messages). Records of types not registered are
        returned as dicts. A class registered again for a type replaces the
        one before.
        """
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

    def write_limits(self) -> WriteLimits:
        """Return the server's write limits (from GetSchema, fetched once)."""
        if self._limits is None:
            self.get_schema()
        assert self._limits is not None
        return self._limits

    # --------------------------------------------------------------- writes

    def writer(
        self,
        op: Op = "insert",
        *,
        max_records: int = 1000,
        max_bytes: int = 0,
        linger: float = 0.0,
    ) -> Writer:
        """Open a batching writer for op: "insert", "update", "upsert" or "remove".

        A batch is sent at ``max_records`` records, at ``max_bytes`` bytes
        (0: only the server's message limit), and ``linger`` seconds after
        its first record (0: only when full, on ``flush`` and at the end).
        See ``Writer``.
        """
        return Writer(self, op, max_records=max_records, max_bytes=max_bytes, linger=linger)

    def _stub_write(self, requests: Iterator[bytes]) -> Any:
        return self._write(requests, metadata=self._md)

    def insert(self, records: Iterable[Record], type: str | None = None) -> WriteResult:
        """Insert records on one stream; every one is durable when this returns."""
        return self._write_all("insert", records, type)

    def update(self, records: Iterable[Record], type: str | None = None) -> WriteResult:
        """Replace existing records; a missing primary key is NOT_FOUND."""
        return self._write_all("update", records, type)

    def upsert(self, records: Iterable[Record], type: str | None = None) -> WriteResult:
        """Insert or replace records."""
        return self._write_all("upsert", records, type)

    def remove(self, records: Iterable[Record], type: str | None = None) -> WriteResult:
        """Delete the records with these primary keys (other fields are ignored)."""
        return self._write_all("remove", records, type)

    def _write_all(self, op: Op, records: Iterable[Record], type: str | None) -> WriteResult:
        with self.writer(op) as w:
            w.write_many(records, type)
        return w.close()

    # ------------------------------------------------ batches, transactions

    def apply(
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
        """Apply one batch atomically, if its conditions hold; return its durable position.

        ``op`` is the operation of every record ("insert", "update",
        "upsert", "remove" or "patch"), or ``ops`` one per record.
        ``conditions`` (``if_record``, ``if_key``, ``if_query``) must all
        hold in the state the batch starts from, checked atomically with
        its writes; if one does not, nothing is applied and
        ``Aborted`` names the condition and the version it found. A
        batch of conditions alone writes nothing and only checks them.
        ``fields`` and ``add`` are a patch's (see ``patch``). Other
        failures raise ``WriteError`` naming the record and field.
        """
        return apply_batch(
            self,
            records,
            op=op,
            ops=ops,
            type=type,
            conditions=conditions,
            fields=fields,
            add=add,
            timeout=timeout,
        )

    def patch(
        self,
        records: Iterable[Record],
        *,
        fields: Iterable[str] = (),
        add: Iterable[str] = (),
        type: str | None = None,
        conditions: Iterable[pb.Condition] = (),
        timeout: float | None = None,
    ) -> int:
        """Change some fields of existing records in one batch; return its position.

        Each record holds its primary key and the new values: the fields
        named in ``fields`` (paths, dotted through message fields) take the
        record's values (a field the record lacks is cleared), the numeric
        fields named in ``add`` have the record's value added to the stored
        one (a counter, without reading it first), and everything else the
        stored record holds is kept. A missing record is NOT_FOUND.
        """
        return self.apply(
            records,
            op="patch",
            type=type,
            conditions=conditions,
            fields=fields,
            add=add,
            timeout=timeout,
        )

    def key_record(self, type: str, key: Key) -> any_pb2.Any:
        """Return a record of ``type`` holding only ``key`` (as ``get`` takes it): ``if_key``'s."""
        return key_record(self.schema(), type, key)

    def transaction(self, *, timeout: float | None = None) -> Transaction:
        """Begin an optimistic transaction; ``commit`` it, or use it as a context manager.

        ``with db.transaction() as tx:`` commits at the end of the block
        (not when it raises) and does not retry: a conflict raises
        ``Aborted``. Use ``transact`` or ``transactional`` to retry.
        ``timeout`` bounds each of its calls.
        """
        return Transaction(self, timeout)

    def transact(
        self,
        fn: Callable[[Transaction], T],
        *,
        max_attempts: int = MAX_ATTEMPTS,
        base_delay: float = BASE_DELAY,
        max_delay: float = MAX_DELAY,
        timeout: float | None = None,
    ) -> T:
        """Run ``fn(tx)`` and commit what it wrote, running it again while that conflicts.

        ``fn`` reads through ``tx`` (``get``, ``get_many``, ``query``,
        ``count``) and writes through it (``insert``, ``update``,
        ``upsert``, ``remove``, ``patch``); the writes commit as one batch,
        on condition that nothing read has changed. When it has, ``fn``
        runs again on a new transaction after a random pause below
        ``base_delay`` doubled at each attempt (at most ``max_delay``).
        Returns what ``fn`` returned once its commit succeeded. After
        ``max_attempts`` the last ``Aborted`` is raised, its
        ``attempts`` set. An exception ``fn`` raises ends it with nothing
        written, unless what it read has changed since: then it runs again.
        ``fn`` may run several times, so it should have no other effects.
        """
        return transact(
            self,
            fn,
            max_attempts=max_attempts,
            base_delay=base_delay,
            max_delay=max_delay,
            timeout=timeout,
        )

    @overload
    def transactional(self, fn: Callable[Concatenate[Transaction, P], T], /) -> Callable[P, T]: ...

    @overload
    def transactional(
        self,
        /,
        *,
        max_attempts: int = ...,
        base_delay: float = ...,
        max_delay: float = ...,
        timeout: float | None = ...,
    ) -> Callable[[Callable[Concatenate[Transaction, P], T]], Callable[P, T]]: ...

    def transactional(
        self,
        fn: Callable[Concatenate[Transaction, P], T] | None = None,
        /,
        *,
        max_attempts: int = MAX_ATTEMPTS,
        base_delay: float = BASE_DELAY,
        max_delay: float = MAX_DELAY,
        timeout: float | None = None,
    ) -> Any:
        """Decorate ``fn(tx, *args)`` to run as ``transact`` runs it: ``fn(*args)``.

        ``@db.transactional`` or ``@db.transactional(max_attempts=20)``.
        """

        def wrap(f: Callable[Concatenate[Transaction, P], T]) -> Callable[P, T]:
            @functools.wraps(f)
            def run(*args: P.args, **kwargs: P.kwargs) -> T:
                return self.transact(
                    lambda tx: f(tx, *args, **kwargs),
                    max_attempts=max_attempts,
                    base_delay=base_delay,
                    max_delay=max_delay,
                    timeout=timeout,
                )

            return run

        return wrap if fn is None else wrap(fn)

    # ---------------------------------------------------------------- reads

    def search(
        self,
        queries: Iterable[pb.Query],
        *,
        batch_size: int = 1000,
        decode: Decode = "auto",
        versions: bool = False,
        timeout: float | None = None,
    ) -> Iterator[SearchResult]:
        """Run many queries on one Search stream; yield each one's results as it finishes.

        Queries are sent ``batch_size`` to a request (batching is what makes
        small queries fast). Results come in the order queries finish;
        ``SearchResult.index`` is the query's position in ``queries``. A
        failed query sets its result's ``error`` and fails alone.
        ``versions`` asks every query for its records' versions
        (``SearchResult.versions``); ``select(..., versions=True)`` asks one.
        """
        s = Search(self, decode, timeout)
        chunk: list[pb.Query] = []
        for q in queries:
            chunk.append(_versioned(q) if versions else q)
            if len(chunk) >= batch_size:
                s.send(chunk)
                chunk = []
        if chunk:
            s.send(chunk)
        s.close()
        return s.results()

    def open_search(self, *, decode: Decode = "auto", timeout: float | None = None) -> Search:
        """Open a Search stream to send batches of queries to as they come."""
        return Search(self, decode, timeout)

    def scan(
        self,
        query: QueryLike,
        where: Where = None,
        *,
        parallelism: int = 1,
        batch_size: int = 0,
        decode: Decode = "auto",
        versions: bool = False,
        timeout: float | None = None,
        **query_options: Any,
    ) -> Scan:
        """Stream every match of one query, read by ``parallelism`` readers on the server.

        ``query`` is a ``select(...)`` or a type name with ``where`` and
        ``select``'s keyword options. Iterate over the result; its
        ``count`` is set at the end. With ``versions``, ``Scan.version`` is
        the version of the record returned last, and ``Scan.versioned()``
        yields ``Versioned(record, version)`` pairs.
        """
        q = _as_query(query, where, query_options, versions)
        req = pb.ScanRequest(query=q, parallelism=parallelism, batch_size=batch_size)
        call = self._scan(req, timeout=timeout, metadata=self._md)
        return Scan(call, decoder(self, decode))

    def query(
        self,
        query: QueryLike,
        where: Where = None,
        *,
        page_size: int = 0,
        page_token: str = "",
        decode: Decode = "auto",
        versions: bool = False,
        timeout: float | None = None,
        **query_options: Any,
    ) -> Page:
        """Fetch one page of a query; pass its ``next_page_token`` for the next.

        A token resumes after the last key of its page (never an offset);
        it is refused with another query, or once the type was re-created.
        With ``versions``, ``Page.versions`` holds each record's version.
        """
        q = _as_query(query, where, query_options, versions)
        req = pb.QueryRequest(query=q, page_size=page_size, page_token=page_token)
        try:
            resp: pb.QueryResponse = self._query(req, timeout=timeout, metadata=self._md)
        except grpc.RpcError as e:
            raise read_error(e) from None
        return Page(
            records=decoder(self, decode)(list(resp.records)),
            next_page_token=resp.next_page_token,
            plan=resp.plan if resp.HasField("plan") else None,
            count=resp.count,
            versions=list(resp.versions),
        )

    def aggregate(
        self,
        query: QueryLike,
        where: Where = None,
        *,
        group_by: Sequence[str] = (),
        functions: str | Sequence[str] = "count()",
        explain: bool = False,
        timeout: float | None = None,
    ) -> Aggregation:
        """Aggregate a query's matches by group (``functions="count(),sum(score)"``).

        One call on one snapshot; ``Aggregation.rows`` holds a dict per group.
        """
        req, fns = aggregate_request(_as_query(query, where, {}), group_by, functions, explain)
        try:
            resp: pb.QueryResponse = self._query(req, timeout=timeout, metadata=self._md)
        except grpc.RpcError as e:
            raise read_error(e) from None
        return aggregation(resp, group_by, fns)

    def pages(
        self,
        query: QueryLike,
        where: Where = None,
        *,
        page_size: int = 0,
        decode: Decode = "auto",
        versions: bool = False,
        timeout: float | None = None,
        **query_options: Any,
    ) -> Iterator[Page]:
        """Yield every page of a query in order, following the tokens (each page its snapshot)."""
        q = _as_query(query, where, query_options, versions)
        token = ""
        while True:
            page = self.query(
                q, page_size=page_size, page_token=token, decode=decode, timeout=timeout
            )
            yield page
            if not page.next_page_token:
                return
            token = page.next_page_token

    def get(
        self,
        type: str,
        keys: Iterable[Key],
        *,
        decode: Decode = "auto",
        versions: bool = False,
        timeout: float | None = None,
    ) -> GetResult:
        """Read records of ``type`` by primary key, all on one snapshot.

        A key is the value of a one-field primary key (``7``, ``"ann"``), a
        list or tuple of a compound key's values in primary-key order, a
        dict by field path, or a record (message or ``Any``) of which only
        the primary-key fields are read. The result holds the records found
        in the order of their keys, and the keys missing by position and as
        given (``missing``, ``missing_keys``);
        with ``versions``, each record's version (``GetResult.versions``).
        A server answers as many records as fit in one response and names
        the keys left over; ``get`` asks again for those until every key is
        answered (on a later snapshot: compare versions across them).
        """
        given = list(keys)
        found = self._lookup(type, given, versions, timeout)
        order = sorted(found)
        missing = [i for i in range(len(given)) if i not in found]
        return GetResult(
            decoder(self, decode)([found[i][0] for i in order]),
            missing,
            [found[i][1] for i in order] if versions else [],
            [given[i] for i in missing],
        )

    def get_versioned(
        self,
        type: str,
        keys: Iterable[Key],
        *,
        decode: Decode = "auto",
        timeout: float | None = None,
    ) -> list[Versioned]:
        """Read records by primary key with their versions, parallel to ``keys``.

        Each item is ``Versioned(record, version)``: the record decoded as
        ``decode`` asks and its version, or ``(None, 0)`` for a key that has
        no record. A version changes whenever the record is written and
        grows over time; pass it to ``if_key`` or ``if_record`` to write
        only if the record is still as read.
        """
        given = list(keys)
        found = self._lookup(type, given, True, timeout)
        order = sorted(found)
        decoded = dict(zip(order, decoder(self, decode)([found[i][0] for i in order]), strict=True))
        return [
            Versioned(decoded[i], found[i][1]) if i in found else Versioned(None, 0)
            for i in range(len(given))
        ]

    def _lookup(
        self, type: str, keys: list[Key], versions: bool, timeout: float | None
    ) -> dict[int, tuple[any_pb2.Any, int]]:
        """Return the record and version (0 without versions) found for each key, by index."""
        found: dict[int, tuple[any_pb2.Any, int]] = {}
        todo = list(range(len(keys)))
        while todo:
            req, order = get_request(type, keys, todo, versions)
            try:
                resp: pb.GetResponse = self._get(req, timeout=timeout, metadata=self._md)
            except grpc.RpcError as e:
                raise read_error(e) from None
            todo = take_get_response(type, resp, order, todo, found)
        return found

    def watch(
        self,
        types: str | Iterable[str],
        where: Where = None,
        *,
        start: Start = "now",
        old_records: bool = False,
        batch_size: int | None = None,
        decode: Decode = "auto",
        timeout: float | None = None,
        resume: bool = True,
        resume_timeout: float | None = None,
    ) -> Watch:
        """Stream the committed changes to records of ``types``, in commit order.

        ``where`` is an expression or a text filter, as for ``select``: a
        change is sent when the record after it (for a remove, before it)
        matches. ``start`` is ``"now"``, ``"oldest"`` or after a position:
        ``Watch.position`` of an earlier watch, a ``Position``, ``(commit,
        index)``, a write acknowledgement's commit (``WriteResult.position``)
        or the text ``"C.I"``; the new watch gets every later change once.
        ``old_records`` also sends each update's and remove's record as it
        was before. ``batch_size`` caps the changes per message (None: the
        server's default). Keys and records are decoded as ``decode`` asks.
        Iterate over the result; leaving the loop or ``close`` ends the
        stream. A start older than the changes the server keeps raises
        ``OutOfRange`` (a ``QueryError`` whose ``oldest`` is the oldest
        position the server can start after) on the first iteration.

        With ``resume`` (the default) the watch reconnects on its own after
        a transport failure or a server restart, resuming after the last
        change it received, with a backoff (see ``Watch``); after
        ``resume_timeout`` seconds of failed attempts (None:
        ``RESUME_TIMEOUT``, 60) it raises ``Unavailable``. A watch started
        at ``"now"`` that fails before its first message resumes at
        ``"now"`` again. ``timeout`` bounds the whole watch, reconnections
        included.
        """
        names = [types] if isinstance(types, str) else list(types)
        req = changes_request(names, where, start, old_records, batch_size)
        dec = decoder(self, decode)

        def open_call(r: pb.WatchRequest, t: float | None) -> Any:
            return self._watch(r, timeout=t, metadata=self._md)

        return Watch(open_call, dec, Resumer(req, resume, resume_timeout), timeout)

    # ----------------------------------------------------------------- keys

    def create_key(
        self, name: str, role: str, types: Iterable[str] = (), *, timeout: float | None = None
    ) -> str:
        """Create an API key (admin key needed) and return it; it cannot be shown again.

        ``role`` is "read", "write", "schema" or "admin"; ``types`` limits
        the key to record types or package wildcards ("shop.*").
        """
        r = pb.KeyRole.Value("KEY_ROLE_" + role.upper())
        req = pb.CreateKeyRequest(name=name, role=r, types=list(types))
        try:
            resp: pb.CreateKeyResponse = self._create_key(req, timeout=timeout, metadata=self._md)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        return resp.key

    def list_keys(self, *, timeout: float | None = None) -> list[pb.KeyInfo]:
        """List the API keys (names, roles, scopes; never the keys)."""
        try:
            resp: pb.ListKeysResponse = self._list_keys(
                pb.ListKeysRequest(), timeout=timeout, metadata=self._md
            )
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        return list(resp.keys)

    def revoke_key(self, name: str, *, timeout: float | None = None) -> None:
        """Revoke the API key ``name``."""
        try:
            self._revoke_key(pb.RevokeKeyRequest(name=name), timeout=timeout, metadata=self._md)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None


_Req = TypeVar("_Req", bound=_message.Message)
_Resp = TypeVar("_Resp", bound=_message.Message)


def _unary(
    ch: grpc.Channel, method: str, req: type[_Req], resp: type[_Resp]
) -> grpc.UnaryUnaryMultiCallable[_Req, _Resp]:
    return ch.unary_unary(
        _SERVICE + method,
        request_serializer=req.SerializeToString,
        response_deserializer=resp.FromString,
    )


def _as_query(
    query: QueryLike, where: Where, options: dict[str, Any], versions: bool = False
) -> pb.Query:
    if isinstance(query, str):
        return select(query, where, versions=versions, **options)
    if where is not None or options:
        raise TypeError("give where and query options to select(), or a type name here")
    return _versioned(query) if versions else query


def _versioned(q: pb.Query) -> pb.Query:
    """Return q asking for versions (a copy: the caller's query is left as it is)."""
    if q.versions:
        return q
    out = pb.Query()
    out.CopyFrom(q)
    out.versions = True
    return out
