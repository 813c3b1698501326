"""The asyncio batching writer: records packed into batches on one Write stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio
from google.protobuf import any_pb2, json_format
from google.protobuf import message as _message

from protobase._schema import TYPE_URL_PREFIX
from protobase._writer import (
    _ACK_FIELD,
    _ACK_INTERVAL,
    _OPS,
    _REQUEST_OVERHEAD,
    CHANNEL_MAX_SEND,
    Op,
    WriteResult,
    _need_type,
    _type_prefix,
    _varint,
    record_parts,
)
from protobase.errors import WriteError, write_error, write_error_from_rpc

if TYPE_CHECKING:
    from protobase.aio._client import Client


class Writer:
    """Batches records onto one Write stream; use as ``async with db.writer() as w``.

    ``await w.write(record)`` and ``await w.write_many(records)`` send a
    batch whenever it holds ``max_records`` records or ``max_bytes`` bytes,
    or ``linger`` seconds after its first record, and on ``flush()`` and at
    the end of the block, which waits until everything is durable. Failures
    are as ``protobase.Writer``'s: a ``WriteError`` (of the class of its
    status) naming the batch, record, type and field; the writer stays
    failed. Leaving the block on an exception cancels the stream. For one
    task at a time.
    """

    def __init__(
        self, client: Client, op: Op, *, max_records: int, max_bytes: int, linger: float
    ) -> None:
        if op not in _OPS:
            raise ValueError(f"unknown write operation {op!r}; want one of {sorted(_OPS)}")
        if max_records <= 0:
            raise ValueError("max_records must be positive")
        self._client = client
        self._max_records = max_records
        self._max_bytes = max_bytes
        self._linger = linger
        self._max_message = CHANNEL_MAX_SEND
        self._op_field = b"\x08" + _varint(_OPS[op])
        self._prefixes: dict[Any, bytes] = {}
        self._urls: dict[bytes, str] = {}
        self._parts: list[bytes] = []
        self._count = 0
        self._size = 0
        self._sent = 0
        self._asked = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._error: WriteError | None = None
        self._acked_batches = 0
        self._acked_records = 0
        self._position = 0
        self._acked = asyncio.Condition()
        # Held while a batch is handed to the stream: a linger timer's batch
        # and the caller's never interleave their writes.
        self._sending = asyncio.Lock()
        self._ended = False
        self._end_error: WriteError | None = None
        self._call: Any = None
        self._receiver: asyncio.Task[None] | None = None

    async def _open(self) -> None:
        if self._call is not None:
            return
        limits = await self._client.write_limits()
        if self._max_records > limits.max_batch_records:
            raise ValueError(
                f"max_records {self._max_records} is over the server's limit of "
                f"{limits.max_batch_records} records per batch"
            )
        self._max_message = min(limits.max_message_bytes, CHANNEL_MAX_SEND)
        self._call = self._client._write(metadata=self._client._md)
        self._receiver = asyncio.create_task(self._receive())

    async def _receive(self) -> None:
        err: WriteError | None = None
        try:
            async for resp in self._call:
                async with self._acked:
                    self._acked_batches = resp.batch + 1
                    self._acked_records = resp.records
                    self._position = resp.position
                    self._acked.notify_all()
        except grpc.RpcError as e:
            err = write_error_from_rpc(e, self._acked_batches, self._acked_records)
        finally:
            async with self._acked:
                self._ended = True
                self._end_error = err
                self._acked.notify_all()

    def _stream_error(self) -> WriteError:
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

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._ended and self._end_error is not None:
            raise self._fail(self._end_error)
        if self._closed:
            raise WriteError(None, "the writer is closed")

    # ---------------------------------------------------------------- writes

    async def write(
        self,
        record: _message.Message | any_pb2.Any | Mapping[str, Any] | bytes,
        type: str | None = None,
    ) -> None:
        """Add one record (the forms ``protobase.Writer.write`` takes)."""
        await self.write_many([record], type)

    async def write_many(
        self,
        records: Iterable[_message.Message | any_pb2.Any | Mapping[str, Any] | bytes],
        type: str | None = None,
    ) -> None:
        """Add many records."""
        await self._open()
        self._check()
        for r in records:
            await self._add(r, type)

    async def _add(self, record: Any, type_name: str | None) -> None:
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
            msg = await self._from_dict(_need_type(type_name), record)
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
            await self._send(False)
        self._parts += parts
        self._count += 1
        self._size += size
        if self._count >= self._max_records or (self._max_bytes and self._size >= self._max_bytes):
            await self._send(False)
        elif self._count == 1 and self._linger > 0:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._linger, self._linger_flush)

    async def _from_dict(self, type_name: str, record: Mapping[str, Any]) -> _message.Message:
        try:
            return (await self._client.schema()).from_dict(type_name, record)
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
        self._timer = None
        if self._error is None and not self._closed and self._count:
            task = asyncio.ensure_future(self._send(False, only_pending=True))
            # A failure is kept in _error: the next call raises it.
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _send(self, ack: bool, only_pending: bool = False) -> None:
        """Send the pending records as one batch (with ``only_pending``, only if there are any)."""
        async with self._sending:
            if only_pending and not self._count:
                return
            await self._send_locked(ack)

    async def _send_locked(self, ack: bool) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = time.monotonic()
        if ack or now - self._asked >= _ACK_INTERVAL:
            ack = True
            self._asked = now
        parts = [self._op_field, *self._parts]
        if ack:
            parts.append(_ACK_FIELD)
        self._parts = []
        self._count = 0
        self._size = 0
        if self._ended:
            raise self._fail(self._stream_error())
        try:
            await self._call.write(b"".join(parts))
        except (grpc.RpcError, asyncio.InvalidStateError):
            assert self._receiver is not None
            await asyncio.shield(self._receiver)
            raise self._fail(self._stream_error()) from None
        self._sent += 1

    # ---------------------------------------------------------------- ends

    async def flush(self) -> None:
        """Send the pending records and wait until every batch so far is durable."""
        await self._open()
        self._check()
        await self._flush()

    async def _flush(self) -> None:
        if self._count or self._acked_batches < self._sent:
            await self._send(True)
        want = self._sent
        async with self._acked:
            await self._acked.wait_for(lambda: self._acked_batches >= want or self._ended)
            if self._acked_batches < want:
                raise self._fail(self._stream_error())

    @property
    def durable(self) -> int:
        """Return the records the server has said are durable so far."""
        return self._acked_records

    async def wait_durable(self, records: int, timeout: float | None = None) -> bool:
        """Wait until the server has said ``records`` records are durable (``Writer.wait_durable``).

        Returns False on timeout; raises the writer's ``WriteError`` if the
        stream fails first. It sends nothing.
        """
        async with self._acked:
            try:
                await asyncio.wait_for(
                    self._acked.wait_for(lambda: self._acked_records >= records or self._ended),
                    timeout,
                )
            except asyncio.TimeoutError:
                return False
            if self._acked_records >= records:
                return True
        raise self._fail(self._stream_error())

    async def close(self) -> WriteResult:
        """Flush, end the stream and return its counts (raises ``WriteError``)."""
        if self._error is not None:
            raise self._error
        if not self._closed:
            await self._open()
            self._closed = True
            try:
                await self._flush()
            finally:
                if not self._ended:
                    await self._call.done_writing()
            assert self._receiver is not None
            await self._receiver
            if self._end_error is not None:
                raise self._fail(self._end_error)
        return WriteResult(self._acked_batches, self._acked_records, self._position)

    async def abort(self) -> None:
        """Cancel the stream without sending what is pending."""
        if self._timer is not None:
            self._timer.cancel()
        self._closed = True
        self._parts = []
        self._count = 0
        if self._call is not None:
            self._call.cancel()
        if self._receiver is not None:
            await asyncio.gather(self._receiver, return_exceptions=True)

    async def __aenter__(self) -> Writer:
        await self._open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            await self.close()
        else:
            await self.abort()
