"""Async iterators over Scan and Watch streams."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import grpc
import grpc.aio
from google.protobuf import any_pb2

from protobase._reads import Decoder, SearchResult, Versioned, read_error, search_results
from protobase._watch import (
    Change,
    Resumer,
    WatchState,
    _watch_error,
    ended_without_status,
    records_of,
)
from protobase.errors import QueryError, query_error
from protobase.v1 import protobase_pb2 as pb

#: Decodes a list of records, fetching the schema first when it needs to.
AsyncDecoder = Callable[[list[any_pb2.Any]], Awaitable[list[Any]]]


class Search:
    """An open Search stream: many queries in flight, results by query (``open_search``).

    ``await send(queries)`` sends a batch in one request and returns the
    queries' indexes; ``results()`` yields each query's ``SearchResult``
    as it finishes, until every query sent before ``await close()`` has
    finished. Sending and receiving may run in different tasks.
    """

    def __init__(
        self, call: Any, decoder_for: Callable[[list[any_pb2.Any]], Awaitable[Decoder]]
    ) -> None:
        self._call = call
        self._decoder_for = decoder_for
        self._next = 0
        self._closed = False

    async def send(self, queries: Iterable[pb.Query]) -> range:
        """Send queries in one request; return their indexes on the stream."""
        if self._closed:
            raise ValueError("the search stream is closed for sending")
        req = pb.SearchRequest(queries=queries)
        first = self._next
        self._next += len(req.queries)
        try:
            await self._call.write(req)
        except grpc.RpcError as e:
            raise read_error(e) from None
        return range(first, first + len(req.queries))

    async def close(self) -> None:
        """Send no more queries; ``results`` ends once the sent ones finish."""
        if not self._closed:
            self._closed = True
            await self._call.done_writing()

    def cancel(self) -> None:
        """Abandon the stream and every query in flight."""
        self._closed = True
        self._call.cancel()

    async def results(self) -> AsyncIterator[SearchResult]:
        """Yield each query's results as it finishes (raises ``QueryError`` if the stream fails)."""
        pending: dict[int, SearchResult] = {}
        try:
            async for resp in self._call:
                recs = [r for b in resp.results for r in b.records]
                dec = await self._decoder_for(recs) if recs else None
                for r in search_results(resp, pending, dec):
                    yield r
        except grpc.RpcError as e:
            raise read_error(e) from None


class Scan:
    """Iterates (``async for``) over every match of one Scan; ``count`` and ``plan`` at the end.

    With ``versions``, ``version`` is the version of the record returned
    last, and ``versioned()`` iterates over ``Versioned`` pairs instead.
    """

    def __init__(self, call: Any, decode: AsyncDecoder) -> None:
        self._call = call
        self._decode = decode
        self._records: list[Any] = []
        self._versions: list[int] = []
        self._next = 0
        self._done = False
        #: Total matches, set when iteration ends.
        self.count = 0
        #: The plan, when the query asked for explain.
        self.plan: pb.Plan | None = None
        #: The version of the record returned last (0 without ``versions``).
        self.version = 0

    def __aiter__(self) -> Scan:
        return self

    async def versioned(self) -> AsyncIterator[Versioned]:
        """Yield each remaining match with its version (the query must ask for versions)."""
        async for r in self:
            yield Versioned(r, self.version)

    async def __anext__(self) -> Any:
        while self._next >= len(self._records):
            if self._done:
                raise StopAsyncIteration
            try:
                resp = await self._call.read()
            except grpc.RpcError as e:
                raise read_error(e) from None
            if resp is grpc.aio.EOF:
                raise query_error(grpc.StatusCode.UNKNOWN, "scan ended without its last message")
            if resp.HasField("plan"):
                self.plan = resp.plan
            if resp.done:
                self._done = True
                self.count = resp.count
            self._records = await self._decode(list(resp.records))
            self._versions = list(resp.versions)
            self._next = 0
        i = self._next
        self._next += 1
        self.version = self._versions[i] if i < len(self._versions) else 0
        return self._records[i]

    def close(self) -> None:
        """Stop the scan early."""
        self._call.cancel()

    async def __aenter__(self) -> Scan:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class Watch(WatchState):
    """Iterates (``async for``) over the changes of one Watch stream, in commit order, once.

    It reconnects and resumes as ``protobase.Watch`` does (the same backoff,
    bounds and errors). Leaving an ``async with`` block or ``close`` ends it.
    """

    def __init__(
        self,
        open_call: Callable[[pb.WatchRequest, float | None], Any],
        decode: AsyncDecoder,
        resumer: Resumer,
        timeout: float | None = None,
    ) -> None:
        super().__init__(lambda recs: recs)  # _take is given the records decoded
        self._open = open_call
        self._adecode = decode
        self._resumer = resumer
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._call = open_call(resumer.req, timeout)
        #: How many times the watch reconnected.
        self.reconnects = 0

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> Change:
        if self._closed:
            raise StopAsyncIteration
        while not self._pending:
            resp = await self._receive()
            self._take(resp, await self._adecode(records_of(resp)))
        return self._pop()

    async def _receive(self) -> pb.WatchResponse:
        while True:
            try:
                resp = await self._call.read()
            except grpc.RpcError as e:
                if self._closed:
                    raise StopAsyncIteration from None
                if not self._resumer.retriable(e):
                    raise _watch_error(e) from None
                await self._reconnect(functools.partial(_watch_error, e))
                continue
            if resp is grpc.aio.EOF:
                if self._closed:
                    raise StopAsyncIteration
                if not self._resumer.retriable(None):
                    raise ended_without_status()
                await self._reconnect(ended_without_status)
                continue
            self._resumer.received()
            message: pb.WatchResponse = resp
            return message

    async def _reconnect(self, failure: Callable[[], QueryError]) -> None:
        pause = self._resumer.delay()
        if pause is None:
            raise failure()
        await asyncio.sleep(pause)
        if self._closed:
            raise StopAsyncIteration
        timeout = None
        if self._deadline is not None:
            timeout = self._deadline - time.monotonic()
            if timeout <= 0:
                raise query_error(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"the watch's deadline passed: {failure().message}",
                )
        self._call = self._open(self._resumer.request(self._after), timeout)
        self.reconnects += 1

    def close(self) -> None:
        """End the watch."""
        self._closed = True
        self._call.cancel()

    async def __aenter__(self) -> Watch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
