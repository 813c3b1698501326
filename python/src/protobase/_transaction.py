"""Optimistic transactions: reads that record what they saw, writes sent as one batch.

A transaction reads through the server as any read does, and notes what
each read saw: the version of each record read, 0 for each key read and
not found, the count and highest version of each query's matches. Its
writes are kept in the client until it commits, as one batch whose
conditions are exactly those reads: the batch applies only if nothing read
has changed since, atomically with the check. If something did change the
server refuses the batch with ABORTED (``ConflictError``) and nothing of it
is applied; ``Client.transact`` then runs the function again, reading the
new state, after a random pause that grows with each attempt.

Everything read through the transaction is serializable with its writes.
Reads see what is stored, not the transaction's own pending writes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf import any_pb2

from protobase._batch import BatchOp, Record, apply_batch, to_any
from protobase._errors import ConflictError, ProtobaseError
from protobase._keys import Key, key_record
from protobase._query import Where, select
from protobase._reads import Decode, decoder
from protobase.v1 import protobase_pb2 as pb

if TYPE_CHECKING:
    from protobase._client import Client

T = TypeVar("T")

#: Defaults of ``Client.transact``: attempts, and the first and largest
#: bound of the random pause between them, in seconds.
MAX_ATTEMPTS = 10
BASE_DELAY = 0.005
MAX_DELAY = 1.0


class Transaction:
    """One attempt of an optimistic transaction; not safe for concurrent use.

    Reads (``get``, ``get_many``, ``query``, ``count``) go to the server at
    once and record what they saw; writes (``insert``, ``update``,
    ``upsert``, ``remove``, ``patch``) are kept until ``commit``, which
    sends them as one batch with a condition per read (and those given to
    ``check``). Reads do not see the transaction's own writes.

    ``Client.transact`` runs a function with a transaction and retries it;
    ``with client.transaction() as tx:`` commits at the end of the block
    and does not retry (a block cannot run itself again).
    """

    def __init__(self, client: Client, timeout: float | None = None) -> None:
        self._client = client
        self._timeout = timeout
        self._conditions: list[pb.Condition] = []
        self._seen: set[bytes] = set()
        self._records: list[any_pb2.Any] = []
        self._ops: list[BatchOp] = []
        self._fields: tuple[str, ...] | None = None
        self._add: tuple[str, ...] = ()
        self._committed = False
        #: The durable position of the committed batch (0 before, or when
        #: there was nothing to send).
        self.position = 0

    # ---------------------------------------------------------------- reads

    def get(self, type: str, key: Key, *, decode: Decode = None) -> Any | None:
        """Read one record by primary key (None when there is none)."""
        return self.get_many(type, [key], decode=decode)[0]

    def get_many(
        self, type: str, keys: Iterable[Key], *, decode: Decode = None
    ) -> list[Any | None]:
        """Read records by primary key: a list parallel to ``keys``, None where missing.

        Each key becomes a condition: its record is still at the version
        read, or still absent.
        """
        keys = list(keys)
        found = self._client._lookup(type, keys, True, self._timeout)
        schema = self._client.schema()
        for i, k in enumerate(keys):
            version = found[i][1] if i in found else 0
            c = pb.Condition(version=version)
            c.key.CopyFrom(key_record(schema, type, k))
            self._note(c)
        order = sorted(found)
        decoded = decoder(self._client, decode)([found[i][0] for i in order])
        by_key = dict(zip(order, decoded, strict=True))
        return [by_key.get(i) for i in range(len(keys))]

    def query(
        self, query: pb.Query | str, where: Where = None, *, decode: Decode = None, **options: Any
    ) -> list[Any]:
        """Read every match of a query, on one snapshot (a Scan).

        The query becomes a condition: it still matches as many records,
        the highest version among them unchanged. Its ``limit`` applies to
        both. A server bounds the matches a condition may count, so read
        large sets in ways that name fewer records.
        """
        q = _query(query, where, options)
        if q.count:
            raise ValueError("a count query reads no records: use Transaction.count")
        q.versions = True
        scan = self._client.scan(q, decode=decode, timeout=self._timeout)
        records: list[Any] = []
        top = 0
        for r, v in scan.versioned():
            records.append(r)
            top = max(top, v)
        c = pb.Condition(count=len(records), max_version=top)
        c.query.CopyFrom(_condition_query(q))
        self._note(c)
        return records

    def count(self, query: pb.Query | str, where: Where = None, **options: Any) -> int:
        """Count the matches of a query; the count becomes a condition."""
        q = _query(query, where, options)
        q.count = True
        n = self._client.query(q, timeout=self._timeout).count
        c = pb.Condition(count=n)
        c.query.CopyFrom(_condition_query(q))
        self._note(c)
        return n

    def check(self, *conditions: pb.Condition) -> None:
        """Add conditions of your own to the commit (``if_key``, ``if_query``).

        An ``if_record`` index names the transaction's writes in the order
        they were made.
        """
        for c in conditions:
            self._note(c)

    def _note(self, c: pb.Condition) -> None:
        b = c.SerializeToString(deterministic=True)
        if b not in self._seen:
            self._seen.add(b)
            self._conditions.append(c)

    # --------------------------------------------------------------- writes

    def insert(self, *records: Record, type: str | None = None) -> None:
        """Insert records at commit (ALREADY_EXISTS if one is there by then)."""
        self._write("insert", records, type)

    def update(self, *records: Record, type: str | None = None) -> None:
        """Replace existing records at commit (NOT_FOUND if one is missing)."""
        self._write("update", records, type)

    def upsert(self, *records: Record, type: str | None = None) -> None:
        """Insert or replace records at commit."""
        self._write("upsert", records, type)

    def remove(self, *records: Record, type: str | None = None) -> None:
        """Remove the records with these primary keys at commit."""
        self._write("remove", records, type)

    def patch(
        self,
        *records: Record,
        fields: tuple[str, ...] | list[str] = (),
        add: tuple[str, ...] | list[str] = (),
        type: str | None = None,
    ) -> None:
        """Patch records at commit: set ``fields``, add to ``add`` (see ``Client.patch``).

        A transaction's patches are one batch's, so they all name the same
        ``fields`` and ``add``.
        """
        f, a = tuple(fields), tuple(add)
        if not f and not a:
            raise ValueError("a patch names fields to set or to add")
        if self._fields is not None and (f, a) != (self._fields, self._add):
            raise ValueError(
                f"a transaction's patches share one fields and add list: "
                f"fields={list(self._fields)} add={list(self._add)} already, "
                f"not fields={list(f)} add={list(a)}"
            )
        self._fields, self._add = f, a
        self._write("patch", records, type)

    def _write(self, op: BatchOp, records: tuple[Record, ...], type: str | None) -> None:
        if self._committed:
            raise ValueError("the transaction is committed")
        # Converted now, so that a dict the schema refuses fails here.
        for r in records:
            self._records.append(to_any(self._client, r, type, len(self._records)))
            self._ops.append(op)

    # --------------------------------------------------------------- commit

    def commit(self) -> int:
        """Send the writes as one batch, conditional on every read; return its position.

        Raises ``ConflictError`` (nothing applied) if anything read has
        changed since, or another ``WriteError``. A transaction that read
        and wrote nothing sends nothing; one that only read sends its
        conditions alone, so that it, too, fails if what it read changed.
        """
        if self._committed:
            raise ValueError("the transaction is committed")
        self._committed = True
        if not self._records and not self._conditions:
            return 0
        one_op = len(set(self._ops)) == 1
        self.position = apply_batch(
            self._client,
            self._records,
            op=self._ops[0] if one_op else None,
            ops=None if one_op or not self._ops else self._ops,
            type=None,
            conditions=self._conditions,
            fields=self._fields or (),
            add=self._add,
            timeout=self._timeout,
        )
        return self.position

    def _stale(self) -> bool:
        """Report whether anything read has changed (a batch of its conditions alone)."""
        if not self._conditions:
            return False
        try:
            apply_batch(
                self._client,
                (),
                op=None,
                ops=None,
                type=None,
                conditions=self._conditions,
                fields=(),
                add=(),
                timeout=self._timeout,
            )
        except ConflictError:
            return True
        except ProtobaseError:
            return False
        return False

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None and not self._committed:
            self.commit()


def _query(query: pb.Query | str, where: Where, options: dict[str, Any]) -> pb.Query:
    """Return a copy of the query to read (the caller's is left as it is)."""
    if isinstance(query, str):
        return select(query, where, **options)
    if where is not None or options:
        raise TypeError("give where and query options to select(), or a type name here")
    q = pb.Query()
    q.CopyFrom(query)
    return q


def _condition_query(q: pb.Query) -> pb.Query:
    """Return the query a condition names: what selects the matches, nothing of their form."""
    c = pb.Query()
    c.CopyFrom(q)
    c.versions = c.explain = c.keys_only = c.count = False
    return c


def transact(
    client: Client,
    fn: Callable[[Transaction], T],
    *,
    max_attempts: int = MAX_ATTEMPTS,
    base_delay: float = BASE_DELAY,
    max_delay: float = MAX_DELAY,
    timeout: float | None = None,
) -> T:
    """Run ``fn`` in a transaction and commit it, again while the commit conflicts.

    See ``Client.transact``.
    """
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    attempt = 0
    while True:
        attempt += 1
        tx = Transaction(client, timeout)
        try:
            result = fn(tx)
        except Exception:
            # An error raised from reads that no longer hold (say, two
            # reads on different snapshots) is an artefact of the conflict:
            # run again. Otherwise it is the function's own.
            if attempt < max_attempts and tx._stale():
                _pause(attempt, base_delay, max_delay)
                continue
            raise
        try:
            tx.commit()
        except ConflictError as e:
            if attempt >= max_attempts:
                e.attempts = attempt
                raise
            _pause(attempt, base_delay, max_delay)
            continue
        return result


def _pause(attempt: int, base: float, cap: float) -> None:
    """Sleep a random time below a bound that doubles with each attempt ("full jitter").

    Randomness spreads the contenders of a hot record apart, so that one of
    them commits in each round instead of all of them conflicting again.
    """
    time.sleep(random.uniform(0, min(cap, base * 2 ** (attempt - 1))))
