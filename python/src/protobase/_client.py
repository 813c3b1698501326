"""The client: a connection to one server and every call of the API."""

from __future__ import annotations

import base64
import ipaddress
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import grpc
from google.protobuf import any_pb2, struct_pb2
from google.protobuf import message as _message

from protobase._errors import from_rpc_error
from protobase._query import Enum, Where, select
from protobase._reads import (
    Decode,
    GetResult,
    Page,
    Scan,
    Search,
    SearchResult,
    decoder,
    read_error,
)
from protobase._schema import TYPE_URL_PREFIX, Schema, read_proto_files
from protobase._watch import Start, Watch, changes_request
from protobase._writer import CHANNEL_MAX_SEND, Op, WriteLimits, Writer, WriteResult
from protobase.v1 import protobase_pb2 as pb

_SERVICE = "/protobase.v1.Protobase/"

#: A record as the writer takes it: a message, an Any, or (with a type
#: name) a dict or the record's encoded bytes.
Record = _message.Message | any_pb2.Any | Mapping[str, Any] | bytes

#: A primary key for ``Client.get``: a value, a list or tuple of a compound
#: key's values, a dict by field path, or a record holding the key fields.
Key = (
    bool
    | int
    | float
    | str
    | bytes
    | Enum
    | list[Any]
    | tuple[Any, ...]
    | Mapping[str, Any]
    | _message.Message
)

#: A query: a built one (``select``) or a record type's full name, whose
#: other parts are then given as keyword arguments.
QueryLike = pb.Query | str


@dataclass(frozen=True)
class TLS:
    """TLS settings: the CA to trust and, for mutual TLS, a client certificate.

    Each of ``ca``, ``cert`` and ``key`` is a PEM file path or PEM bytes;
    without ``ca`` the system's roots are trusted. ``server_name`` checks
    the server's certificate for another name than the address's host.
    """

    ca: str | bytes | None = None
    cert: str | bytes | None = None
    key: str | bytes | None = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        """Return the gRPC channel credentials."""
        return grpc.ssl_channel_credentials(
            root_certificates=_pem(self.ca),
            private_key=_pem(self.key),
            certificate_chain=_pem(self.cert),
        )


def _pem(v: str | bytes | None) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    with open(v, "rb") as f:
        return f.read()


def is_loopback(addr: str) -> bool:
    """Report whether addr ("host:port") names this machine's loopback interface."""
    host = addr.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
        opts: list[tuple[str, Any]] = [
            ("grpc.max_send_message_length", CHANNEL_MAX_SEND),
            ("grpc.max_receive_message_length", 64 << 20),
        ]
        if isinstance(tls, TLS) and tls.server_name:
            opts.append(("grpc.ssl_target_name_override", tls.server_name))
        opts.extend(options)
        if tls is None or tls is False:
            if api_key and not is_loopback(addr):
                raise ValueError(
                    "refusing to send the API key over plaintext to a non-loopback "
                    "address; pass tls=True or tls=TLS(ca=...)"
                )
            self._channel = grpc.insecure_channel(addr, options=opts)
        else:
            if tls is True:
                creds = grpc.ssl_channel_credentials()
            elif isinstance(tls, TLS):
                creds = tls.credentials()
            else:
                creds = tls
            self._channel = grpc.secure_channel(addr, creds, options=opts)
        self.addr = addr
        self._md: tuple[tuple[str, str], ...] = (
            (("authorization", "Bearer " + api_key),) if api_key else ()
        )
        self._schema: Schema | None = None
        self._limits: WriteLimits | None = None
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
        files: Mapping[str, str] | Iterable[str | os.PathLike[str]],
        *,
        dry_run: bool = False,
        allow_drop: Iterable[str] = (),
        root: str | None = None,
        timeout: float | None = None,
    ) -> pb.ApplySchemaResponse:
        """Make ``files`` the whole schema; return the plan.

        ``files`` maps import paths to .proto sources, or lists .proto
        files and directories, read as ``protobase schema apply`` reads
        them (import paths relative to ``root``, or to each file's own
        directory). Files applied before and missing now are removed, with
        their record types; a type is dropped (with its records) only when
        named in ``allow_drop``. With ``dry_run`` the server only plans.
        A schema that does not compile raises ``ProtobaseError``
        (INVALID_ARGUMENT) listing every problem as file:line:col.
        """
        sources = dict(files) if isinstance(files, Mapping) else read_proto_files(files, root)
        req = pb.ApplySchemaRequest(files=sources, dry_run=dry_run, allow_drop=list(allow_drop))
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

    # ---------------------------------------------------------------- reads

    def search(
        self,
        queries: Iterable[pb.Query],
        *,
        batch_size: int = 1000,
        decode: Decode = None,
        timeout: float | None = None,
    ) -> Iterator[SearchResult]:
        """Run many queries on one Search stream; yield each one's results as it finishes.

        Queries are sent ``batch_size`` to a request (batching is what makes
        small queries fast). Results come in the order queries finish;
        ``SearchResult.index`` is the query's position in ``queries``. A
        failed query sets its result's ``error`` and fails alone.
        """
        s = Search(self, decode, timeout)
        chunk: list[pb.Query] = []
        for q in queries:
            chunk.append(q)
            if len(chunk) >= batch_size:
                s.send(chunk)
                chunk = []
        if chunk:
            s.send(chunk)
        s.close()
        return s.results()

    def open_search(self, *, decode: Decode = None, timeout: float | None = None) -> Search:
        """Open a Search stream to send batches of queries to as they come."""
        return Search(self, decode, timeout)

    def scan(
        self,
        query: QueryLike,
        where: Where = None,
        *,
        parallelism: int = 1,
        batch_size: int = 0,
        decode: Decode = None,
        timeout: float | None = None,
        **query_options: Any,
    ) -> Scan:
        """Stream every match of one query, read by ``parallelism`` readers on the server.

        ``query`` is a ``select(...)`` or a type name with ``where`` and
        ``select``'s keyword options. Iterate over the result; its
        ``count`` is set at the end.
        """
        q = _as_query(query, where, query_options)
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
        decode: Decode = None,
        timeout: float | None = None,
        **query_options: Any,
    ) -> Page:
        """Fetch one page of a query; pass its ``next_page_token`` for the next.

        A token resumes after the last key of its page (never an offset);
        it is refused with another query, or once the type was re-created.
        """
        q = _as_query(query, where, query_options)
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
        )

    def pages(
        self,
        query: QueryLike,
        where: Where = None,
        *,
        page_size: int = 0,
        decode: Decode = None,
        timeout: float | None = None,
        **query_options: Any,
    ) -> Iterator[Page]:
        """Yield every page of a query in order, following the tokens."""
        q = _as_query(query, where, query_options)
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
        decode: Decode = None,
        timeout: float | None = None,
    ) -> GetResult:
        """Read records of ``type`` by primary key, all on one snapshot.

        A key is the value of a one-field primary key (``7``, ``"ann"``), a
        list or tuple of a compound key's values in primary-key order, a
        dict by field path, or a record (message or ``Any``) of which only
        the primary-key fields are read. The result holds the records found
        in the order of their keys and the positions of the keys missing.
        A server answers as many records as fit in one response and names
        the keys left over; ``get`` asks again for those until every key is
        answered.
        """
        given = list(keys)
        found: dict[int, any_pb2.Any] = {}
        missing: list[int] = []
        todo = list(range(len(given)))
        while todo:
            req, order = _get_request(type, given, todo)
            try:
                resp: pb.GetResponse = self._get(req, timeout=timeout, metadata=self._md)
            except grpc.RpcError as e:
                raise read_error(e) from None
            skip = set(resp.missing) | set(resp.unanswered)
            missing.extend(order[m] for m in resp.missing)
            again = [order[u] for u in resp.unanswered if u < len(order)]
            records = iter(resp.records)
            for p, i in enumerate(order):
                if p not in skip:
                    rec = next(records, None)
                    if rec is not None:
                        found[i] = rec
            if len(again) == len(todo):
                raise ValueError(f"get {type}: the server answered none of {len(todo)} keys")
            todo = again
        records_in_order = [found[i] for i in sorted(found)]
        return GetResult(decoder(self, decode)(records_in_order), sorted(missing))

    def watch(
        self,
        types: str | Iterable[str],
        where: Where = None,
        *,
        start: Start = "now",
        old_records: bool = False,
        batch_size: int | None = None,
        decode: Decode = None,
        timeout: float | None = None,
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
        ``WatchOutOfRange`` (a ``QueryError`` whose ``oldest`` is the oldest
        position the server can start after) on the first iteration.
        """
        names = [types] if isinstance(types, str) else list(types)
        req = changes_request(names, where, start, old_records, batch_size)
        call = self._watch(req, timeout=timeout, metadata=self._md)
        return Watch(call, decoder(self, decode))

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


def _pack(m: _message.Message) -> any_pb2.Any:
    a = any_pb2.Any(type_url=TYPE_URL_PREFIX + m.DESCRIPTOR.full_name, value=m.SerializeToString())
    return a


def key_value(k: Any) -> struct_pb2.Value:
    """Return a primary key (or one of its values) as a JSON value for Get.

    Integers beyond a double's exact range travel as strings, as protobuf's
    JSON mapping allows for 64-bit fields; bytes travel as base64.
    """
    v = struct_pb2.Value()
    _set_key(v, k)
    return v


def _get_request(type: str, keys: list[Key], todo: list[int]) -> tuple[pb.GetRequest, list[int]]:
    """Build the request for the keys at the indexes ``todo``.

    Returns it with the index of the key at each request position: the
    server numbers JSON keys first, then key records.
    """
    req = pb.GetRequest(type=type)
    values: list[int] = []
    records: list[int] = []
    for i in todo:
        k = keys[i]
        if isinstance(k, _message.Message):
            req.key_records.append(k if isinstance(k, any_pb2.Any) else _pack(k))
            records.append(i)
        else:
            _set_key(req.keys.add(), k)
            values.append(i)
    return req, values + records


def _set_key(v: struct_pb2.Value, k: Any) -> None:
    # Filled in place: passing messages to constructors copies them.
    if isinstance(k, bool):
        v.bool_value = k
    elif isinstance(k, int):
        if abs(k) <= 1 << 53:
            v.number_value = k
        else:
            v.string_value = str(k)
    elif isinstance(k, float):
        v.number_value = k
    elif isinstance(k, str):
        v.string_value = k
    elif isinstance(k, bytes):
        v.string_value = base64.b64encode(k).decode()
    elif isinstance(k, Enum):
        v.string_value = k.name
    elif isinstance(k, (list, tuple)):
        values = v.list_value.values
        for x in k:
            _set_key(values.add(), x)
    elif isinstance(k, Mapping):
        fields = v.struct_value.fields
        for name, x in k.items():
            _set_key(fields[name], x)
    else:
        raise TypeError(f"cannot use a {k.__class__.__name__} as a primary key")


def _as_query(query: QueryLike, where: Where, options: dict[str, Any]) -> pb.Query:
    if isinstance(query, str):
        return select(query, where, **options)
    if where is not None or options:
        raise TypeError("give where and query options to select(), or a type name here")
    return query
