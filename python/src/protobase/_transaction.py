"""Optimistic transactions: reads that record what they saw, writes sent as one batch.

A transaction reads through the server as any read does, and notes what
each read saw: the version of each record read, 0 for each key read and
not found, the count and highest version of each query's matches. Its
writes are kept in the client until it commits, as one batch whose
conditions are exactly those reads: the batch applies only if nothing read
has changed since, atomically with the check. If something did change the
server refuses the batch with ABORTED (``Aborted``) and nothing of it
is applied; ``Client.transact`` then runs the function again, reading the
new state, after a random pause that grows with each attempt.

Everything read through the transaction is serializable with its writes.
Reads by primary key see the transaction's own writes; queries see what
is stored.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf import any_pb2

from protobase._batch import BatchOp, Record, apply_batch, to_any
from protobase._keys import Key
from protobase._query import Where, select
from protobase._reads import Decode, decoder
from protobase._txrecord import Identity, TxRecord, key_identity, lookup_key, record_key
from protobase.errors import ConflictError, ProtobaseError
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

    Reads (``get``, ``get_many``, ``query``, ``count``) record what they
    saw; writes (``insert``, ``update``, ``upsert``, ``remove``, ``patch``)
    are kept until ``commit``, which sends them as one batch, in the order
    made, with one condition per read (and those given to ``check``).

    A record is one condition however often it is read, and a second read
    returns what the first did. ``get``, and a query that names one primary
    key (``eq`` on each primary-key field, alone or under one ``and_``; no
    text filter, ``keys_only`` or ``count``), return what the
    transaction's own writes leave: the record it inserted, updated or
    upserted, None for one it removed, and for a patch the stored record
    (read then, if it was not yet) with the patch applied in the client.
    Other queries return what is stored, without the transaction's writes:
    the client cannot evaluate filters and orders over them.

    ``Client.transact`` runs a function with a transaction and retries it;
    ``with client.transaction() as tx:`` commits at the end of the block
    and does not retry (a block cannot run itself again).
    """

    def __init__(
        self,
        client: Client,
        timeout: float | None = None,
        attempt: int = 1,
        managed: bool = False,
    ) -> None:
        self._client = client
        self._managed = managed  # transact commits it
        self._timeout = timeout
        #: The number of this run of the transaction's function: 1 for the first.
        self.attempt = attempt
        self._recs: dict[bytes, TxRecord] = {}
        self._conditions: list[pb.Condition] = []
        self._queries: set[bytes] = set()  # the query conditions recorded
        self._checks: set[bytes] = set()  # the conditions given to check
        self._writes: list[any_pb2.Any] = []
        self._ops: list[BatchOp] = []
        self._fields: tuple[str, ...] | None = None  # the patch, once there is one
        self._add: tuple[str, ...] = ()
        self._ended = False
        #: The durable position of the committed batch (0 before, or when
        #: there was nothing to send).
        self.position = 0

    def _usable(self) -> None:
        if self._ended:
            raise ValueError("the transaction has ended: it committed, or its function returned")

    # ---------------------------------------------------------------- reads

    def get(self, type: str, key: Key, *, decode: Decode = "auto") -> Any | None:
        """Read one record by primary key (None when there is none)."""
        return self.get_many(type, [key], decode=decode)[0]

    def get_many(
        self, type: str, keys: Iterable[Key], *, decode: Decode = "auto"
    ) -> list[Any | None]:
        """Read records by primary key: a list parallel to ``keys``, None where missing.

        Keys take the forms ``Client.get`` takes. Each record becomes a key
        condition: still at the version read, or still absent.
        """
        self._usable()
        schema = self._client.schema()
        ids = [key_identity(schema, type, k) for k in keys]
        return self._decoded(self._get_keys(type, ids), decode)

    def _get_keys(self, type: str, ids: list[Identity]) -> list[any_pb2.Any | None]:
        """Read the records ids: from the server those not read yet whose state is needed."""
        fetch = self._to_fetch(ids)
        if fetch:
            got = self._client.get_versioned(
                type, [r.key for r in fetch.values()], decode="any", timeout=self._timeout
            )
            for r, g in zip(fetch.values(), got, strict=True):
                r.read, r.stored, r.version = True, g.record, g.version
        return self._as_read(ids)

    def _to_fetch(self, ids: list[Identity]) -> dict[bytes, TxRecord]:
        """Return the records of ids not read yet whose stored state is needed."""
        fetch: dict[bytes, TxRecord] = {}
        for id, key in ids:
            r = self._record(id, key)
            if not (r.read or (r.wrote and r.known)):
                fetch[id] = r
        return fetch

    def _as_read(self, ids: list[Identity]) -> list[any_pb2.Any | None]:
        """Return the records ids as the transaction sees them, noting their conditions."""
        schema = self._client.schema()
        out: list[any_pb2.Any | None] = []
        for id, _ in ids:
            r = self._recs[id]
            if r.wrote and not r.known:  # patches of what was just read
                r.resolve(schema, self._fields or (), self._add)
            if not r.wrote or r.from_stored:
                self._key_condition(r, r.version)
            out.append(r.value if r.wrote else r.stored)
        return out

    def query(
        self, query: pb.Query | str, where: Where = None, *, decode: Decode = "auto", **options: Any
    ) -> list[Any]:
        """Read every match of a query (up to its ``limit``), on one snapshot.

        A lookup by primary key is read as ``get`` reads it. Any other
        query becomes a query condition: at commit it must match as many
        records, with the same highest version, as it did here. A query
        that filled its limit also makes each record it returned a key
        condition, since a record leaving the first ``limit`` matches lets
        one from beyond them in without changing either figure. A server
        bounds the matches a condition may count: read small, indexed
        ranges this way, and many records by key with ``get_many``.
        """
        self._usable()
        q = _query(query, where, options)
        if q.count:
            raise ValueError("a count query reads no records: use Transaction.count")
        look = lookup_key(self._client.schema(), q)
        if look is not None:
            got = self._get_keys(q.type, [look])
            return self._decoded([r for r in got if r is not None], decode)
        sent = pb.Query()
        sent.CopyFrom(q)
        sent.versions, sent.explain = True, False
        recs: list[any_pb2.Any] = []
        versions: list[int] = []
        for r, v in self._client.scan(sent, decode="any", timeout=self._timeout).versioned():
            recs.append(r)
            versions.append(v)
        self._read_query(q, recs, versions, len(recs))
        return self._decoded(recs, decode)

    def count(self, query: pb.Query | str, where: Where = None, **options: Any) -> int:
        """Count the matches of a query (up to its ``limit``); the count becomes a condition."""
        self._usable()
        q = _query(query, where, options)
        q.count = True
        n = self._client.query(q, decode="any", timeout=self._timeout).count
        self._read_query(q, [], [], n)
        return n

    def _read_query(
        self, q: pb.Query, recs: list[any_pb2.Any], versions: list[int], count: int
    ) -> None:
        """Record what the query q read: records with their versions, or a count."""
        c = pb.Condition()
        c.query.CopyFrom(_condition_query(q))
        c.count = count
        if not q.count:
            c.max_version = max(versions, default=0)
        # One condition per query: what a query read twice saw first is
        # what the commit checks (if the second read saw otherwise, the
        # first no longer holds and the commit aborts).
        ident = (b"c" if q.count else b"r") + c.query.SerializeToString(deterministic=True)
        if ident not in self._queries:
            self._queries.add(ident)
            self._conditions.append(c)
        if q.count or not q.limit or len(recs) < q.limit:
            return
        schema = self._client.schema()
        for a, v in zip(recs, versions, strict=True):
            r = self._record(*record_key(schema, a))
            if not r.read and not q.keys_only:
                r.read, r.stored, r.version = True, a, v
            self._key_condition(r, v)

    def check(self, *conditions: pb.Condition) -> None:
        """Add conditions of your own to the commit (``if_key``, ``if_query``).

        An ``if_record`` index names the transaction's writes in the order
        they were made.
        """
        self._usable()
        for c in conditions:
            b = c.SerializeToString(deterministic=True)
            if b not in self._checks:
                self._checks.add(b)
                self._conditions.append(c)

    def _record(self, id: bytes, key: any_pb2.Any) -> TxRecord:
        r = self._recs.get(id)
        if r is None:
            r = self._recs[id] = TxRecord(key)
        return r

    def _key_condition(self, r: TxRecord, version: int) -> None:
        """Record that the transaction depends on r being at version, once per record."""
        if not r.cond:
            r.cond = True
            c = pb.Condition(version=version)
            c.key.CopyFrom(r.key)
            self._conditions.append(c)

    def _decoded(self, recs: list[Any], decode: Decode) -> list[Any]:
        if decode is None or decode == "any":
            return recs
        dec = decoder(self._client, decode)
        found = iter(dec([r for r in recs if r is not None]))
        return [None if r is None else next(found) for r in recs]

    # --------------------------------------------------------------- writes

    def insert(self, *records: Record, type: str | None = None) -> None:
        """Insert records at commit (ALREADY_EXISTS if one is there by then)."""
        self._write("insert", records, type)

    def update(self, *records: Record, type: str | None = None) -> None:
        """Replace existing records at commit (NOT_FOUND if one is missing by then)."""
        self._write("update", records, type)

    def upsert(self, *records: Record, type: str | None = None) -> None:
        """Insert or replace records at commit."""
        self._write("upsert", records, type)

    def remove(self, *records: Record, type: str | None = None) -> None:
        """Remove the records with these primary keys at commit (other fields are ignored)."""
        self._write("remove", records, type)

    def patch(
        self,
        *records: Record,
        fields: Iterable[str] = (),
        add: Iterable[str] = (),
        type: str | None = None,
    ) -> None:
        """Patch stored records at commit: set ``fields``, add to ``add`` (``Client.patch``).

        The commit is one batch, which carries one patch: every ``patch`` of
        a transaction names the same ``fields`` and ``add`` (in any order);
        patch other records with ``update`` after reading them.
        """
        f, a = tuple(fields), tuple(add)
        if not f and not a:
            raise ValueError("a patch names fields to set or to add")
        if self._fields is not None and (set(f), set(a)) != (set(self._fields), set(self._add)):
            raise ValueError(
                f"a transaction's commit carries one patch: fields={list(f)} add={list(a)} "
                f"differs from the first, fields={list(self._fields)} add={list(self._add)}; "
                "patch those records with update after reading them"
            )
        self._write("patch", records, type, f, a)

    def _write(
        self,
        op: BatchOp,
        records: tuple[Record, ...],
        type: str | None,
        fields: tuple[str, ...] = (),
        add: tuple[str, ...] = (),
    ) -> None:
        """Buffer records under op: all of them, or on an error none."""
        self._usable()
        schema = self._client.schema()
        n = len(self._writes)
        anys = [to_any(self._client, r, type, n + i) for i, r in enumerate(records)]
        staged: dict[bytes, TxRecord] = {}  # the records as this call leaves them
        for a in anys:
            id, key = record_key(schema, a)
            r = staged.get(id)
            if r is None:
                known = self._recs.get(id)
                r = known.clone() if known is not None else TxRecord(key)
                staged[id] = r
            r.write(schema, op, a, fields, add)
        self._recs.update(staged)
        self._writes.extend(anys)
        self._ops.extend([op] * len(anys))
        if op == "patch" and self._fields is None:
            self._fields, self._add = fields, add

    # --------------------------------------------------------------- commit

    def commit(self) -> int:
        """Send the writes as one batch, conditional on every read; return its position.

        Raises ``Aborted`` (nothing applied) if anything read has
        changed since, or another ``WriteError``. A transaction that read
        and wrote nothing sends nothing; one that only read sends its
        conditions alone, so that its reads are checked to have held
        together at one instant.
        """
        if self._managed:
            raise ValueError("transact commits the transaction when its function returns")
        return self._commit()

    def _commit(self) -> int:
        self._usable()
        self._ended = True
        if not self._writes and not self._conditions:
            return 0
        one_op = len(set(self._ops)) == 1
        self.position = apply_batch(
            self._client,
            self._writes,
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
        if exc_type is None and not self._ended:
            self.commit()
        self._ended = True


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
        tx = Transaction(client, timeout, attempt, managed=True)
        try:
            result = fn(tx)
        except Exception:
            tx._ended = True
            # An error raised from reads that no longer hold (say, two
            # reads on different snapshots) is an artefact of the conflict:
            # run again. Otherwise it is the function's own.
            if attempt < max_attempts and tx._stale():
                _pause(attempt, base_delay, max_delay)
                continue
            raise
        try:
            tx._commit()
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
