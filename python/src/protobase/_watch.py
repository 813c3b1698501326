"""Change feeds: ``Client.watch`` streams committed changes and resumes after a position.

A ``Position`` is where a change sits in commit order: the commit (the
position a durable write acknowledgement carries) and the change's index
within it. A watch started after the position of the last change it saw
(``Watch.position``) gets every later change once.
"""

from __future__ import annotations

import functools
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import grpc
from google.protobuf import any_pb2

from protobase._reads import Decoder, read_error
from protobase.errors import OutOfRange, QueryError, _details, query_error
from protobase.v1 import protobase_pb2 as pb

_UINT64_MAX = (1 << 64) - 1
_UINT32_MAX = (1 << 32) - 1
_POSITION_TEXT = re.compile(r"([0-9]+)(?:\.([0-9]+))?")

#: A change's operation: what happened to the record's key.
ChangeOp = Literal["insert", "update", "remove"]

_OPS: dict[int, ChangeOp] = {
    pb.CHANGE_OP_INSERT: "insert",
    pb.CHANGE_OP_UPDATE: "update",
    pb.CHANGE_OP_REMOVE: "remove",
}


@dataclass(frozen=True, slots=True)
class Position:
    """A place in commit order: ``commit``, and ``index`` of a change within it.

    ``index`` None means the whole commit: a start after it skips every
    change of that commit (a write acknowledgement's position is of this
    kind). Positions order by commit, then index, the whole commit last.
    ``str`` gives the text form ``C`` or ``C.I``; ``Position.parse`` reads it.
    """

    commit: int
    index: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.commit, bool) or not isinstance(self.commit, int):
            raise TypeError(f"a position's commit is an int, not {type(self.commit).__name__}")
        if not 0 <= self.commit <= _UINT64_MAX:
            raise ValueError(f"a position's commit must be in [0, 2**64), not {self.commit}")
        if self.index is not None:
            if isinstance(self.index, bool) or not isinstance(self.index, int):
                raise TypeError(f"a position's index is an int, not {type(self.index).__name__}")
            if not 0 <= self.index <= _UINT32_MAX:
                raise ValueError(f"a position's index must be in [0, 2**32), not {self.index}")

    @classmethod
    def parse(cls, text: str) -> Position:
        """Read the text form: ``"C"`` (a whole commit) or ``"C.I"``."""
        m = _POSITION_TEXT.fullmatch(text.strip())
        if m is None:
            raise ValueError(f"a position is COMMIT or COMMIT.INDEX (digits), not {text!r}")
        return cls(int(m.group(1)), None if m.group(2) is None else int(m.group(2)))

    @classmethod
    def from_pb(cls, p: pb.Position) -> Position:
        """Return the position of a ``protobase.v1.Position``."""
        return cls(p.commit, p.index if p.HasField("index") else None)

    def to_pb(self) -> pb.Position:
        """Return the ``protobase.v1.Position`` of this position."""
        p = pb.Position(commit=self.commit)
        if self.index is not None:
            p.index = self.index
        return p

    def _key(self) -> tuple[int, int]:
        return (self.commit, _UINT32_MAX + 1 if self.index is None else self.index)

    def __lt__(self, other: Position) -> bool:
        return self._key() < other._key()

    def __le__(self, other: Position) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: Position) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: Position) -> bool:
        return self._key() >= other._key()

    def __str__(self) -> str:
        return str(self.commit) if self.index is None else f"{self.commit}.{self.index}"


#: Where a watch starts: ``"now"`` (changes committed after it begins),
#: ``"oldest"`` (the oldest change the server keeps), or after a position:
#: a ``Position``, a ``(commit, index)`` tuple, a commit (int: after the
#: whole commit, as from a write acknowledgement) or the text ``"C"`` /
#: ``"C.I"``.
Start = Literal["now", "oldest"] | Position | tuple[int, int | None] | int | str


def watch_start(start: Start) -> pb.WatchStart:
    """Return the ``WatchStart`` of a start given as ``Client.watch`` takes it."""
    if start == "now":
        return pb.WatchStart(now=True)
    if start == "oldest":
        return pb.WatchStart(oldest=True)
    if isinstance(start, Position):
        pos = start
    elif isinstance(start, tuple):
        if len(start) != 2:
            raise ValueError(f"a start tuple is (commit, index), not {start!r}")
        pos = Position(start[0], start[1])
    elif isinstance(start, str):
        pos = Position.parse(start)
    elif isinstance(start, int) and not isinstance(start, bool):
        pos = Position(start)
    else:
        raise TypeError(
            f'a start is "now", "oldest", a Position, (commit, index), a commit or "C.I", '
            f"not {start!r}"
        )
    return pb.WatchStart(after=pos.to_pb())


def _watch_error(e: grpc.RpcError) -> QueryError:
    err = read_error(e)
    if err.code != grpc.StatusCode.OUT_OF_RANGE:
        return err
    suffix = "/" + pb.Position.DESCRIPTOR.full_name
    for d in _details(e):
        if d.type_url.endswith(suffix) and isinstance(err, OutOfRange):
            err.oldest = Position.from_pb(pb.Position.FromString(d.value))
    return err


@dataclass(slots=True)
class Change:
    """One committed change to a record.

    ``key`` is the record holding only its primary-key fields; ``record``
    is the record after the change (None for a remove); ``old_record`` the
    record before it, for updates and removes of a watch that asked for
    ``old_records`` (None otherwise). All three are decoded as the watch's
    ``decode`` asks, like the records of the other reads.

    ``old_record_omitted`` says the old record was asked for but left out,
    ``record_omitted`` that the record was left out too: the change with
    them was larger than one message the server sends (docs/watch.md,
    "Changes too large for one message").

    ``expired`` marks a remove of a record whose ttl expiry had passed: the
    reaper's, or the one just before an insert or upsert of its key
    (docs/read.md, "Expiry"). A client's remove leaves it False.
    """

    op: ChangeOp
    type: str
    key: Any
    record: Any
    old_record: Any
    position: Position
    old_record_omitted: bool = False
    record_omitted: bool = False
    expired: bool = False


#: The first pause before a watch reconnects, in seconds; each failed
#: attempt doubles the bound, up to ``RESUME_MAX_DELAY``, and the pause is
#: drawn at random below it ("full jitter").
RESUME_BASE_DELAY = 0.05
#: The longest pause between two reconnection attempts, in seconds.
RESUME_MAX_DELAY = 2.0
#: How long a watch tries to reconnect, in seconds, before raising the
#: failure (``Unavailable``); each message received starts the count anew.
RESUME_TIMEOUT = 60.0

# What gRPC reports when a connection breaks under a stream (rather than a
# status the server sent): worth reconnecting after, like UNAVAILABLE.
_BROKEN = re.compile(r"RST_STREAM|Stream removed|Socket closed|Connection reset|GOAWAY")


class Resumer:
    """When and after what a watch reconnects: the policy shared by sync and async watches."""

    def __init__(self, req: pb.WatchRequest, resume: bool, resume_timeout: float | None) -> None:
        self.req = req
        self.resume = resume
        self.resume_timeout = RESUME_TIMEOUT if resume_timeout is None else resume_timeout
        self._attempt = 0
        self._failing_since: float | None = None

    def retriable(self, e: grpc.RpcError | None) -> bool:
        """Report whether a failure is one of the transport (None: a stream ended without status).

        UNAVAILABLE (the server stopped or cannot be reached) and a broken
        connection are; every status the server sent about the watch itself
        (OUT_OF_RANGE for a trimmed position, INVALID_ARGUMENT, ...) is not.
        """
        if not self.resume:
            return False
        if e is None:
            return True
        if not isinstance(e, (grpc.Call, grpc.aio.AioRpcError)):
            return False
        code = e.code()
        if code == grpc.StatusCode.UNAVAILABLE:
            return True
        broken = code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
        return broken and _BROKEN.search(e.details() or "") is not None

    def delay(self) -> float | None:
        """Return the pause before the next attempt, or None once ``resume_timeout`` has passed."""
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = now
        elif now - self._failing_since > self.resume_timeout:
            return None
        bound = min(RESUME_MAX_DELAY, RESUME_BASE_DELAY * 2**self._attempt)
        self._attempt += 1
        return random.uniform(0, bound)

    def received(self) -> None:
        """Note a message received: the connection works again."""
        self._attempt = 0
        self._failing_since = None

    def request(self, after: Position | None) -> pb.WatchRequest:
        """Return the request that resumes after ``after`` (None: the watch's own start)."""
        if after is None:
            return self.req
        req = pb.WatchRequest()
        req.CopyFrom(self.req)
        req.start.CopyFrom(pb.WatchStart(after=after.to_pb()))
        return req


def records_of(resp: pb.WatchResponse) -> list[any_pb2.Any]:
    """Return the records of a Watch message in order: each change's key, record, old record."""
    recs: list[any_pb2.Any] = []
    for c in resp.changes:
        recs.append(c.key)
        if c.HasField("record"):
            recs.append(c.record)
        if c.HasField("old_record"):
            recs.append(c.old_record)
    return recs


def ended_without_status() -> QueryError:
    """Return the error of a watch stream the server ended without a status."""
    return query_error(grpc.StatusCode.UNKNOWN, "the server ended the watch without a status")


class WatchState:
    """The changes received and not yet returned, and where a watch resumes."""

    def __init__(self, decode: Decoder) -> None:
        self._decode = decode
        self._pending: deque[Change] = deque()
        self._last: Position | None = None  # of the change returned last
        self._after: Position | None = None  # the resume point once _pending is read
        self._closed = False

    @property
    def position(self) -> Position | None:
        """Return the resume point: pass it as ``start`` to a new watch.

        It is the position of the change returned last, or, once every change
        of the message it came in was returned, the server's progress mark
        past it (changes filtered out since then were considered). None
        before the first message.
        """
        return self._last if self._pending else self._after

    def _pop(self) -> Change:
        ch = self._pending.popleft()
        self._last = ch.position
        return ch

    def _take(self, resp: pb.WatchResponse, decoded: list[Any] | None = None) -> None:
        """Queue a message's changes, decoded in one call, and move the resume point.

        ``decoded`` is what the decoder made of ``records_of(resp)``, when
        the caller decoded them itself.
        """
        it = iter(self._decode(records_of(resp)) if decoded is None else decoded)
        after = self._after
        for c in resp.changes:
            key = next(it)
            rec = next(it) if c.HasField("record") else None
            old = next(it) if c.HasField("old_record") else None
            op = _OPS.get(c.op)
            if op is None:
                raise query_error(grpc.StatusCode.UNKNOWN, f"a change with an unknown op {c.op}")
            pos = Position.from_pb(c.position)
            self._pending.append(
                Change(
                    op,
                    c.type,
                    key,
                    rec,
                    old,
                    pos,
                    c.old_record_omitted,
                    c.record_omitted,
                    c.expired,
                )
            )
            after = pos
        if resp.HasField("progress"):
            p = Position.from_pb(resp.progress)
            if after is None or p >= after:
                after = p
        self._after = after


class Watch(WatchState):
    """Iterates over the changes of one Watch stream, in commit order, exactly once.

    A watch has no end of its own: iteration stops only when ``close`` is
    called (or the client closes). When the connection fails or the server
    restarts, the watch reconnects on its own and resumes after the last
    change it received, so every change comes once and in order: it waits
    ``RESUME_BASE_DELAY`` seconds at most before the first attempt, a
    bound doubling with each failed one up to ``RESUME_MAX_DELAY``, and
    after ``resume_timeout`` seconds without success raises the failure
    (``Unavailable``). Any status the server sends about the watch itself is
    raised, never skipped: ``OutOfRange`` for a start (or resume point)
    older than the changes the server keeps, naming the oldest position it
    can start after, ``InvalidArgument``, ``NotFound`` and so on (each a
    ``QueryError``). ``position`` is where a new watch resumes to get every
    change not yet returned, once.

    Leaving a ``for`` loop over the watch (``break``, an exception) closes
    it, and so do ``close`` and the end of a ``with`` block; ``next(watch)``
    reads one change without that.
    """

    def __init__(
        self,
        open_call: Callable[[pb.WatchRequest, float | None], Any],
        decode: Decoder,
        resumer: Resumer,
        timeout: float | None = None,
    ) -> None:
        super().__init__(decode)
        self._open = open_call
        self._resumer = resumer
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._wake = threading.Event()
        self._call = open_call(resumer.req, timeout)
        #: How many times the watch reconnected.
        self.reconnects = 0

    def __iter__(self) -> Iterator[Change]:
        try:
            while True:
                try:
                    ch = next(self)
                except StopIteration:
                    return
                yield ch
        finally:
            self.close()

    def __next__(self) -> Change:
        if self._closed:
            raise StopIteration
        while not self._pending:
            self._take(self._receive())
        return self._pop()

    def _receive(self) -> pb.WatchResponse:
        """Return the next message, reconnecting after failures of the transport."""
        while True:
            try:
                resp: pb.WatchResponse = next(self._call)
            except StopIteration:
                if self._closed:
                    raise
                if not self._resumer.retriable(None):
                    raise ended_without_status() from None
                self._reconnect(ended_without_status)
                continue
            except grpc.RpcError as e:
                if self._closed:
                    raise StopIteration from None
                if not self._resumer.retriable(e):
                    raise _watch_error(e) from None
                self._reconnect(functools.partial(_watch_error, e))
                continue
            self._resumer.received()
            return resp

    def _reconnect(self, failure: Callable[[], QueryError]) -> None:
        """Wait, then open the stream again after the last change received; or raise failure()."""
        pause = self._resumer.delay()
        if pause is None:
            raise failure()
        if self._wake.wait(pause) or self._closed:
            raise StopIteration
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
        if self._closed:  # closed from another thread while the call opened
            self._call.cancel()

    def close(self) -> None:
        """End the watch; an iteration waiting in another thread stops."""
        self._closed = True
        self._wake.set()
        self._call.cancel()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def changes_request(
    types: list[str],
    where: pb.Expr | str | None,
    start: Start,
    old_records: bool,
    batch_size: int | None,
) -> pb.WatchRequest:
    """Build the WatchRequest of ``Client.watch``, refusing what no server accepts."""
    if not types:
        raise ValueError("watch: name at least one record type")
    req = pb.WatchRequest(types=types, old_records=old_records, start=watch_start(start))
    if isinstance(where, str):
        req.filter = where
    elif where is not None:
        req.where.CopyFrom(where)
    if batch_size is not None:
        if isinstance(batch_size, bool) or not 0 < batch_size <= _UINT32_MAX:
            raise ValueError(f"watch: batch_size must be a positive int, not {batch_size!r}")
        req.batch_size = batch_size
    return req
