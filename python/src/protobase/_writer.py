"""The batching writer: records packed into batches on one Write stream.

The writer encodes each batch itself, as the bytes of a
``WriteStreamRequest``, instead of building an ``Any`` message per record:
a record costs its own ``SerializeToString`` (in protobuf's C runtime) and a
few list appends, which is what lets a Python program keep up with the
server (see docs/performance.md, "Python client").
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import grpc
from google.protobuf import any_pb2, json_format
from google.protobuf import message as _message

from protobase._schema import TYPE_URL_PREFIX
from protobase.errors import WriteError, write_error, write_error_from_rpc
from protobase.v1 import protobase_pb2 as pb

if TYPE_CHECKING:
    from protobase._client import Client

#: The write operations, by the names ``Client.writer`` takes.
Op = Literal["insert", "update", "upsert", "remove"]

_OPS: dict[str, int] = {
    "insert": pb.WRITE_OP_INSERT,
    "update": pb.WRITE_OP_UPDATE,
    "upsert": pb.WRITE_OP_UPSERT,
    "remove": pb.WRITE_OP_REMOVE,
}

# How often a writer asks the server to acknowledge a batch as it sends
# them, so that `durable` stays close to what was sent while costing the
# server at most one wait for an fsync per interval (as the Go client).
_ACK_INTERVAL = 0.1

# Batches handed to gRPC and not yet sent: bounds the writer's memory when
# the server is slower than the program.
_MAX_QUEUED = 4

# How many batches asking for an acknowledgement a flush leaves in flight
# before it waits rather than send (as the Go client): the server reads a
# stream's next request while the last waits for its fsync, and the
# records of threads that flush meanwhile gather into one batch.
_FLUSH_DEPTH = 2

# Bytes of a WriteStreamRequest besides its records (op and ack fields).
_REQUEST_OVERHEAD = 16

# The client's own cap on a message it sends (the channel's option).
CHANNEL_MAX_SEND = 64 << 20


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# Encoded lengths up to 16 KiB are looked up, not computed.
_VARINT = [_varint(n) for n in range(1 << 14)]
# WriteStreamRequest.records (field 2, length-delimited) tag and length.
_RECORD_HEADER = [b"\x12" + v for v in _VARINT]
_ACK_FIELD = b"\x18\x01"


def record_parts(prefix: bytes, value: bytes) -> tuple[tuple[bytes, ...], int]:
    """Return the byte strings encoding one record of a WriteStreamRequest, and their size.

    ``prefix`` is ``_type_prefix`` of the record's type URL; joined, the
    parts are what protobuf encodes for ``records`` holding
    ``Any(type_url, value)``.
    """
    n = len(value)
    inner = len(prefix) + n + (len(_VARINT[n]) if n < 16384 else len(_varint(n)))
    if inner < 16384:
        head = _RECORD_HEADER[inner]
        return (head, prefix, _VARINT[n], value), len(head) + inner
    head = b"\x12" + _varint(inner)
    return (head, prefix, _varint(n), value), len(head) + inner


def _type_prefix(type_url: str) -> bytes:
    """Return the bytes of Any.type_url followed by Any.value's tag."""
    url = type_url.encode()
    return b"\x0a" + _varint(len(url)) + url + b"\x12"


@dataclass(frozen=True)
class WriteLimits:
    """The server's limits on one write request (from GetSchema)."""

    max_batch_records: int = 10000
    max_message_bytes: int = 64 << 20


@dataclass(frozen=True)
class WriteResult:
    """What a writer's stream applied: every record counted here is durable."""

    batches: int
    records: int
    #: The server's durable position (commit sequence) of the last batch.
    position: int


class Writer:
    """Batches records onto one Write stream; use as a context manager.

    ``with client.writer("insert") as w: w.write(record)`` sends a batch
    whenever it holds ``max_records`` records or ``max_bytes`` bytes, or
    ``linger`` seconds after its first record, and on ``flush()`` and at
    the end of the block, which waits until everything is durable. Batches
    are sent without waiting for each other.

    The first failure of the stream ends the writer: it raises a
    ``WriteError`` naming the batch, record, type and field, with the counts
    applied before it; every later call raises it again. A record refused
    before sending (too large for any request, or a dict that does not
    convert) is a ``WriteError`` too, and the writer goes on without it.
    ``WriteError`` is the only exception a write raises, but for a
    ``TypeError`` on a value that is no record at all.
    Leaving the block on an exception cancels the stream: pending records
    are not sent, and batches already sent may or may not be applied.

    Safe for concurrent use by several threads.
    """

    def __init__(
        self,
        client: Client,
        op: Op,
        *,
        max_records: int = 1000,
        max_bytes: int = 0,
        linger: float = 0.0,
        limits: WriteLimits | None = None,
    ) -> None:
        if op not in _OPS:
            raise ValueError(f"unknown write operation {op!r}; want one of {sorted(_OPS)}")
        limits = limits or client.write_limits()
        if max_records <= 0:
            raise ValueError("max_records must be positive")
        if max_records > limits.max_batch_records:
            raise ValueError(
                f"max_records {max_records} is over the server's limit of "
                f"{limits.max_batch_records} records per batch"
            )
        self._client = client
        self._max_records = max_records
        self._max_bytes = max_bytes
        self._linger = linger
        self._max_message = min(limits.max_message_bytes, CHANNEL_MAX_SEND)
        self._op_field = b"\x08" + _varint(_OPS[op])
        # Encoded type URLs by type URL or descriptor, and back.
        self._prefixes: dict[Any, bytes] = {}
        self._urls: dict[bytes, str] = {}

        # _lock guards the sending side: the batch being built and the
        # counters of batches sent. A flush releases it while it waits for
        # its acknowledgement, so that other threads go on writing.
        self._lock = threading.Lock()
        self._parts: list[bytes] = []
        self._count = 0  # records in _parts
        self._size = 0  # encoded bytes of _parts
        self._sent = 0  # batches sent
        self._asked = 0.0  # when a batch last asked for an acknowledgement
        self._timer: threading.Timer | None = None
        self._closed = False
        self._error: WriteError | None = None

        # _cond guards the stream's side: the queue of encoded requests
        # read by gRPC's sending thread, the acknowledgements and the end.
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[bytes] = deque()
        self._half_closed = False
        self._acked_batches = 0
        self._acked_records = 0
        # Batches (counted from 1) sent asking for an acknowledgement that
        # has not come, in order, and the last of any such batch.
        self._awaited: deque[int] = deque()
        self._asked_through = 0
        self._position = 0
        self._ended = False
        self._end_error: WriteError | None = None

        self._call = client._stub_write(self._requests())
        self._receiver = threading.Thread(
            target=self._receive, name="protobase-writer", daemon=True
        )
        self._receiver.start()

    # ---------------------------------------------------------------- stream

    def _requests(self) -> Iterator[bytes]:
        while True:
            with self._cond:
                while not self._queue and not self._half_closed and not self._ended:
                    self._cond.wait()
                if not self._queue:
                    return
                req = self._queue.popleft()
                self._cond.notify_all()
            yield req

    def _receive(self) -> None:
        err: WriteError | None = None
        try:
            for resp in self._call:
                with self._cond:
                    self._acked_batches = resp.batch + 1
                    while self._awaited and self._awaited[0] <= self._acked_batches:
                        self._awaited.popleft()
                    self._acked_records = resp.records
                    self._position = resp.position
                    self._cond.notify_all()
        except grpc.RpcError as e:
            with self._cond:
                err = write_error_from_rpc(e, self._acked_batches, self._acked_records)
        finally:
            with self._cond:
                self._ended = True
                self._end_error = err
                self._queue.clear()
                self._cond.notify_all()

    def _enqueue(self, req: bytes) -> None:
        with self._cond:
            while len(self._queue) >= _MAX_QUEUED and not self._ended:
                self._cond.wait()
            if self._ended:
                raise self._fail(self._stream_error())
            self._queue.append(req)
            self._cond.notify_all()

    def _stream_error(self) -> WriteError:
        """Return why the stream ended; call with _cond held and _ended set."""
        if self._end_error is not None:
            return self._end_error
        return write_error(
            grpc.StatusCode.UNKNOWN,
            "write stream ended before every batch was acknowledged",
            batches_applied=self._acked_batches,
            records_applied=self._acked_records,
        )

    def _fail(self, err: WriteError) -> WriteError:
        if self._error is None:
            self._error = err
        return self._error

    # ---------------------------------------------------------------- writes

    def write(
        self,
        record: _message.Message | any_pb2.Any | Mapping[str, Any] | bytes,
        type: str | None = None,
    ) -> None:
        """Add one record.

        ``record`` is a message (a protoc-generated class or one from
        ``client.schema()``), an ``Any`` already packed, or, with ``type``
        (the record type's full name), a dict in protobuf's JSON mapping
        or the record's encoded bytes.
        """
        with self._lock:
            self._check()
            self._add(record, type)

    def write_many(
        self,
        records: Iterable[_message.Message | any_pb2.Any | Mapping[str, Any] | bytes],
        type: str | None = None,
    ) -> None:
        """Add many records; the same as ``write`` for each, with less overhead."""
        with self._lock:
            self._check()
            add = self._add
            for r in records:
                add(r, type)

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._ended and self._end_error is not None:  # a hint read without _cond
            raise self._fail(self._end_error)
        if self._closed:
            raise WriteError(None, "the writer is closed")

    def _add(self, record: Any, type_name: str | None) -> None:
        if isinstance(record, _message.Message):
            if isinstance(record, any_pb2.Any):
                prefix = self._prefix(record.type_url)
                value = record.value
            else:
                desc = record.DESCRIPTOR
                prefix = self._prefixes.get(desc) or self._prefix_of(desc)
                value = record.SerializeToString()
        elif isinstance(record, bytes):
            prefix = self._prefix(TYPE_URL_PREFIX + _need_type(type_name))
            value = record
        elif isinstance(record, Mapping):
            msg = self._from_dict(_need_type(type_name), record)
            prefix = self._prefix_of(msg.DESCRIPTOR)
            value = msg.SerializeToString()
        else:
            raise TypeError(f"cannot write a {record.__class__.__name__} as a record")
        parts, size = record_parts(prefix, value)
        if _REQUEST_OVERHEAD + size > self._max_message:
            raise write_error(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"a record of {size} bytes is over the server's limit of "
                f"{self._max_message} bytes per request; nothing of it was sent",
                type_url=self._urls.get(prefix),
                batches_applied=self._acked_batches,
                records_applied=self._acked_records,
            )
        if self._count and _REQUEST_OVERHEAD + self._size + size > self._max_message:
            self._send(False)
        self._parts += parts
        self._count += 1
        self._size += size
        if self._count >= self._max_records or (self._max_bytes and self._size >= self._max_bytes):
            self._send(False)
        elif self._count == 1 and self._linger > 0:
            self._timer = threading.Timer(self._linger, self._linger_flush)
            self._timer.daemon = True
            self._timer.start()

    def _from_dict(self, type_name: str, record: Mapping[str, Any]) -> _message.Message:
        """Convert a dict through the schema; a refusal is a WriteError, nothing sent."""
        try:
            return self._client.schema().from_dict(type_name, record)
        except (KeyError, json_format.ParseError) as e:
            reason = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
            raise write_error(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"record of {type_name} not converted, nothing of it was sent: {reason}",
                type_url=TYPE_URL_PREFIX + type_name,
                reason=reason,
                batches_applied=self._acked_batches,
                records_applied=self._acked_records,
            ) from e

    def _prefix(self, type_url: str) -> bytes:
        p = self._prefixes.get(type_url)
        if p is None:
            p = self._prefixes[type_url] = _type_prefix(type_url)
            self._urls[p] = type_url
        return p

    def _prefix_of(self, desc: Any) -> bytes:
        p = self._prefixes[desc] = self._prefix(TYPE_URL_PREFIX + desc.full_name)
        return p

    def _linger_flush(self) -> None:
        with self._lock:
            if self._error is None and not self._closed and self._count:
                # A failure is kept in _error: the next call raises it.
                with contextlib.suppress(WriteError):
                    self._send(False)

    def _send(self, ack: bool) -> None:
        """Send the pending records as one batch; call with _lock held."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = time.monotonic()
        if ack or now - self._asked >= _ACK_INTERVAL:
            ack = True
            self._asked = now
        self._parts.insert(0, self._op_field)
        if ack:
            self._parts.append(_ACK_FIELD)
            with self._cond:
                self._awaited.append(self._sent + 1)
                self._asked_through = self._sent + 1
        req = b"".join(self._parts)
        self._parts = []
        self._count = 0
        self._size = 0
        self._enqueue(req)
        self._sent += 1

    # ---------------------------------------------------------------- ends

    def flush(self) -> None:
        """Send the pending records and wait until every batch so far is durable.

        Other threads go on writing while a flush waits. While two flushed
        batches await their acknowledgements, a flush leaves its records
        pending, and those of every thread that flushes meanwhile go out
        as one batch, one fsync for them all, once an acknowledgement
        frees a place.
        """
        with self._lock:
            self._check()
            target = self._sent + 1  # the batch that will carry what is pending now
            with self._cond:
                wait = len(self._awaited) >= _FLUSH_DEPTH
            if not wait:
                target = self._flush_send(target)
        if wait:
            with self._cond:
                while (
                    len(self._awaited) >= _FLUSH_DEPTH
                    and self._asked_through < target
                    and not self._ended
                ):
                    self._cond.wait()
            with self._lock:
                self._check()
                target = self._flush_send(target)
        with self._cond:
            while self._acked_batches < target and not self._ended:
                self._cond.wait()
            if self._acked_batches >= target:
                return
            err = self._stream_error()
        with self._lock:
            raise self._fail(err)

    def _flush_send(self, target: int) -> int:
        """Have a batch from target on ask for an acknowledgement; call with _lock held.

        Return the number of batches whose acknowledgement the flush waits for.
        """
        with self._cond:
            if self._asked_through >= target:
                return target
            acked = self._acked_batches
        # An empty batch only to ask for an acknowledgement the last one
        # did not ask for; none when everything sent is acknowledged.
        if self._count or acked < self._sent:
            self._send(True)
        return self._sent

    def _flush(self) -> None:
        """Flush with _lock held throughout (close)."""
        want = self._flush_send(self._sent + 1)
        with self._cond:
            while self._acked_batches < want and not self._ended:
                self._cond.wait()
            if self._acked_batches < want:
                raise self._fail(self._stream_error())

    @property
    def durable(self) -> int:
        """Return the records the server has said are durable so far."""
        with self._cond:
            return self._acked_records

    def wait_durable(self, records: int, timeout: float | None = None) -> bool:
        """Wait until the server has said ``records`` records are durable.

        Returns False on timeout; raises the writer's ``WriteError`` if the
        stream fails first. Unlike ``flush`` it sends nothing: it waits for
        batches sent by size or ``linger`` (each asks for an acknowledgement
        at most every 0.1 s, and ``flush`` and the end always do).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._acked_records < records and not self._ended:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
            if self._acked_records >= records:
                return True
            err = self._stream_error()
        raise self._fail(err)

    def close(self) -> WriteResult:
        """Flush, end the stream and return its counts (raises ``WriteError``)."""
        with self._lock:
            if self._error is not None:
                raise self._error
            if not self._closed:
                self._closed = True
                try:
                    self._flush()
                finally:
                    with self._cond:
                        self._half_closed = True
                        self._cond.notify_all()
                self._receiver.join()
                with self._cond:
                    if self._end_error is not None:
                        raise self._fail(self._end_error)
            with self._cond:
                return WriteResult(self._acked_batches, self._acked_records, self._position)

    def abort(self) -> None:
        """Cancel the stream without sending what is pending."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._closed = True
            self._parts = []
            self._count = 0
        self._call.cancel()
        self._receiver.join()

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _need_type(type_name: str | None) -> str:
    if not type_name:
        raise TypeError("a dict or bytes record needs type= (the record type's full name)")
    return type_name
