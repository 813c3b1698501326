"""Optimistic transactions on the asyncio client: ``protobase.Transaction`` with awaited reads."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from google.protobuf import any_pb2

from protobase._batch import Record
from protobase._keys import Key
from protobase._query import Where
from protobase._reads import Decode
from protobase._transaction import (
    BASE_DELAY,
    MAX_ATTEMPTS,
    MAX_DELAY,
    _query,
)
from protobase._transaction import Transaction as _SyncTransaction
from protobase._txrecord import Identity, key_identity, lookup_key
from protobase.errors import ConflictError, ProtobaseError
from protobase.v1 import protobase_pb2 as pb

if TYPE_CHECKING:
    from protobase.aio._client import Client

T = TypeVar("T")

#: A transaction's function: ``async def fn(tx) -> T``.
TransactionFn = Callable[["Transaction"], Awaitable[T]]


class Transaction:
    """One attempt of an optimistic transaction (see ``protobase.Transaction``).

    Reads are awaited (``await tx.get(...)``, ``get_many``, ``query``,
    ``count``); writes (``insert``, ``update``, ``upsert``, ``remove``,
    ``patch``) and ``check`` are kept in the client until the commit, so
    they are not. ``async with db.transaction() as tx:`` commits at the end
    of the block; ``await db.transact(fn)`` runs ``fn`` again while the
    commit conflicts.
    """

    def __init__(
        self, client: Client, timeout: float | None = None, attempt: int = 1, managed: bool = False
    ) -> None:
        self._client = client
        self._timeout = timeout
        # The bookkeeping of reads and writes is the sync transaction's; it
        # reads only the schema, fetched before the transaction starts.
        self._tx = _SyncTransaction(cast(Any, client._view), timeout, attempt, managed)
        #: The number of this run of the transaction's function: 1 for the first.
        self.attempt = attempt

    @property
    def position(self) -> int:
        """Return the durable position of the committed batch (0 before)."""
        return self._tx.position

    async def _start(self) -> None:
        await self._client._ready()

    # ---------------------------------------------------------------- reads

    async def get(self, type: str, key: Key, *, decode: Decode = "auto") -> Any | None:
        """Read one record by primary key (None when there is none)."""
        return (await self.get_many(type, [key], decode=decode))[0]

    async def get_many(
        self, type: str, keys: Iterable[Key], *, decode: Decode = "auto"
    ) -> list[Any | None]:
        """Read records by primary key: a list parallel to ``keys``, None where missing."""
        self._tx._usable()
        schema = (await self._client._ready()).schema()
        ids = [key_identity(schema, type, k) for k in keys]
        return await self._decoded(await self._get_keys(type, ids), decode)

    async def _get_keys(self, type: str, ids: list[Identity]) -> list[any_pb2.Any | None]:
        fetch = self._tx._to_fetch(ids)
        if fetch:
            got = await self._client.get_versioned(
                type, [r.key for r in fetch.values()], decode="any", timeout=self._timeout
            )
            for r, g in zip(fetch.values(), got, strict=True):
                r.read, r.stored, r.version = True, g.record, g.version
        return self._tx._as_read(ids)

    async def query(
        self, query: pb.Query | str, where: Where = None, *, decode: Decode = "auto", **options: Any
    ) -> list[Any]:
        """Read every match of a query (up to its ``limit``), on one snapshot."""
        self._tx._usable()
        q = _query(query, where, options)
        if q.count:
            raise ValueError("a count query reads no records: use Transaction.count")
        look = lookup_key((await self._client._ready()).schema(), q)
        if look is not None:
            got = await self._get_keys(q.type, [look])
            return await self._decoded([r for r in got if r is not None], decode)
        sent = pb.Query()
        sent.CopyFrom(q)
        sent.versions, sent.explain = True, False
        recs: list[any_pb2.Any] = []
        versions: list[int] = []
        scan = self._client.scan(sent, decode="any", timeout=self._timeout)
        async for r in scan:
            recs.append(r)
            versions.append(scan.version)
        self._tx._read_query(q, recs, versions, len(recs))
        return await self._decoded(recs, decode)

    async def count(self, query: pb.Query | str, where: Where = None, **options: Any) -> int:
        """Count the matches of a query (up to its ``limit``); the count becomes a condition."""
        self._tx._usable()
        q = _query(query, where, options)
        q.count = True
        n = (await self._client.query(q, decode="any", timeout=self._timeout)).count
        self._tx._read_query(q, [], [], n)
        return n

    async def _decoded(self, recs: list[Any], decode: Decode) -> list[Any]:
        found = iter(await self._client._decode(decode, [r for r in recs if r is not None]))
        return [None if r is None else next(found) for r in recs]

    def check(self, *conditions: pb.Condition) -> None:
        """Add conditions of your own to the commit (``if_key``, ``if_query``)."""
        self._tx.check(*conditions)

    # --------------------------------------------------------------- writes

    def insert(self, *records: Record, type: str | None = None) -> None:
        """Insert records at commit (ALREADY_EXISTS if one is there by then)."""
        self._tx.insert(*records, type=type)

    def update(self, *records: Record, type: str | None = None) -> None:
        """Replace existing records at commit (NOT_FOUND if one is missing by then)."""
        self._tx.update(*records, type=type)

    def upsert(self, *records: Record, type: str | None = None) -> None:
        """Insert or replace records at commit."""
        self._tx.upsert(*records, type=type)

    def remove(self, *records: Record, type: str | None = None) -> None:
        """Remove the records with these primary keys at commit."""
        self._tx.remove(*records, type=type)

    def patch(
        self,
        *records: Record,
        fields: Iterable[str] = (),
        add: Iterable[str] = (),
        type: str | None = None,
    ) -> None:
        """Patch stored records at commit (``protobase.Transaction.patch``)."""
        self._tx.patch(*records, fields=fields, add=add, type=type)

    # --------------------------------------------------------------- commit

    async def commit(self) -> int:
        """Send the writes as one batch, conditional on every read; return its position."""
        if self._tx._managed:
            raise ValueError("transact commits the transaction when its function returns")
        return await self._commit()

    async def _commit(self) -> int:
        tx = self._tx
        tx._usable()
        tx._ended = True
        if not tx._writes and not tx._conditions:
            return 0
        one_op = len(set(tx._ops)) == 1
        tx.position = await self._client.apply(
            tx._writes,
            op=tx._ops[0] if one_op else None,
            ops=None if one_op or not tx._ops else tx._ops,
            conditions=tx._conditions,
            fields=tx._fields or (),
            add=tx._add,
            timeout=self._timeout,
        )
        return tx.position

    async def _stale(self) -> bool:
        """Report whether anything read has changed (a batch of its conditions alone)."""
        if not self._tx._conditions:
            return False
        try:
            await self._client.apply(conditions=self._tx._conditions, timeout=self._timeout)
        except ConflictError:
            return True
        except ProtobaseError:
            return False
        return False

    async def __aenter__(self) -> Transaction:
        await self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None and not self._tx._ended:
            await self.commit()
        self._tx._ended = True


async def transact(
    client: Client,
    fn: TransactionFn[T],
    *,
    max_attempts: int = MAX_ATTEMPTS,
    base_delay: float = BASE_DELAY,
    max_delay: float = MAX_DELAY,
    timeout: float | None = None,
) -> T:
    """Run ``await fn(tx)`` in a transaction and commit it, again while the commit conflicts."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    attempt = 0
    while True:
        attempt += 1
        tx = Transaction(client, timeout, attempt, managed=True)
        await tx._start()
        try:
            result = await fn(tx)
        except Exception:
            tx._tx._ended = True
            # As in the sync transact: an error from reads that no longer
            # hold is an artefact of the conflict, so run again.
            if attempt < max_attempts and await tx._stale():
                await _pause(attempt, base_delay, max_delay)
                continue
            raise
        try:
            await tx._commit()
        except ConflictError as e:
            if attempt >= max_attempts:
                e.attempts = attempt
                raise
            await _pause(attempt, base_delay, max_delay)
            continue
        return result


async def _pause(attempt: int, base: float, cap: float) -> None:
    await asyncio.sleep(random.uniform(0, min(cap, base * 2 ** (attempt - 1))))
