"""The asyncio client against the real server: writes, reads, errors, transactions, watch."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from conftest import SCHEMA_DIR, Restartable, Server
from test_watch_resume import N

import protobase
import protobase.aio
from protobase import (
    Aborted,
    AlreadyExists,
    ConflictError,
    InvalidArgument,
    NotFound,
    OutOfRange,
    QueryError,
    WriteError,
    eq,
    if_key,
    select,
)

USER = "pytest.shop.User"
ACCOUNT = "pytest.bank.Account"
BANK = """
syntax = "proto3";
package pytest.bank;
import "protobase/v1/options.proto";
message Account {
  option (protobase.v1.record) = {primary_key: "id"};
  int64 id = 1;
  int64 balance = 2;
  int64 visits = 3;
}
"""


async def connect(server: Server) -> protobase.aio.Client:
    db = protobase.aio.Client(server.addr)
    await db.apply_schema([SCHEMA_DIR])
    await db.apply_schema({"bank.proto": BANK}, add=True)
    return db


@pytest.mark.asyncio
async def test_writer_and_reads(server: Server, shop_pb2: Any) -> None:
    async with await connect(server) as db:
        async with db.writer("insert", max_records=30) as w:
            for i in range(1, 101):
                await w.write({"id": i, "name": f"u{i}", "age": i}, type=USER)
            await w.flush()
            assert w.durable == 100
        res = await w.close()
        assert (res.records, res.batches) == (100, 4)

        got = [r async for r in db.search([select(USER, eq("id", 7)), select(USER, "age > 98")])]
        by = {r.index: r.records for r in got}
        assert by == {
            0: [{"id": 7, "name": "u7", "age": 7}],
            1: [{"id": 99, "name": "u99", "age": 99}, {"id": 100, "name": "u100", "age": 100}],
        }
        scan = db.scan(USER, "age <= 10", parallelism=2)
        assert sorted([u["id"] async for u in scan]) == list(range(1, 11)) and scan.count == 10
        pages = [p async for p in db.pages(USER, "age <= 10", page_size=4)]
        assert [len(p.records) for p in pages] == [4, 4, 2]
        g = await db.get(USER, [3, 1000])
        assert g.records == [{"id": 3, "name": "u3", "age": 3}] and g.missing == [1]
        (v,) = await db.get_versioned(USER, [3])
        assert v.version > 0
        assert (await db.aggregate(USER, "age <= 10")).rows == [{"count()": 10}]
        assert (await db.query(USER, count=True)).count == 100

        db.register(shop_pb2)
        (u,) = (await db.get(USER, [5])).records
        assert isinstance(u, shop_pb2.User) and u.name == "u5"
        (raw,) = (await db.get(USER, [5], decode="any")).records
        assert raw.type_url.endswith("/" + USER)
        await db.remove([{"id": 5}], type=USER)
        assert (await db.get(USER, [5])).missing == [0]


@pytest.mark.asyncio
async def test_errors(server: Server) -> None:
    async with await connect(server) as db:
        await db.insert([{"id": 1, "name": "a"}], type=USER)
        with pytest.raises(AlreadyExists) as ae:
            async with db.writer("insert") as w:
                await w.write({"id": 1, "name": "b"}, type=USER)
        assert isinstance(ae.value, WriteError) and (ae.value.batch, ae.value.record) == (0, 0)
        with pytest.raises(NotFound):
            await db.update([{"id": 2, "name": "b"}], type=USER)
        key = await db.key_record(USER, 1)
        with pytest.raises(Aborted) as ab:
            await db.apply(conditions=[if_key(key, version=10**9)])
        assert isinstance(ab.value, ConflictError) and ab.value.condition == 0
        assert ab.value.version is not None and 0 < ab.value.version < 10**9
        with pytest.raises(InvalidArgument) as ia:
            [r async for r in db.scan(USER, "nope = 1")]
        assert isinstance(ia.value, QueryError) and ia.value.field
        with pytest.raises(OutOfRange):
            async for _ in db.watch(USER, start=10**9):
                pass


@pytest.mark.asyncio
async def test_transactions_and_patches(server: Server) -> None:
    async with await connect(server) as db:
        await db.insert([{"id": 1, "balance": 0}, {"id": 2, "balance": 100}], type=ACCOUNT)

        async def deposit(tx: protobase.aio.Transaction) -> int:
            a = await tx.get(ACCOUNT, 1)
            assert a is not None
            a["balance"] = a.get("balance", 0) + 1
            tx.update(a, type=ACCOUNT)
            return int(a["balance"])

        async def worker() -> None:
            for _ in range(5):
                await db.transact(deposit, max_attempts=100)

        await asyncio.gather(*(worker() for _ in range(6)))
        assert (await db.get(ACCOUNT, [1])).records == [{"id": 1, "balance": 30}]

        async with db.transaction() as tx:
            rich = await tx.query(ACCOUNT, "balance >= 50")
            assert [r["id"] for r in rich] == [2]
            assert await tx.count(ACCOUNT) == 2
            tx.patch({"id": 2, "visits": 1}, add=["visits"], type=ACCOUNT)
        assert tx.position > 0
        await db.patch([{"id": 2, "visits": 2}], add=["visits"], type=ACCOUNT)
        assert (await db.get(ACCOUNT, [2])).records == [{"id": 2, "balance": 100, "visits": 3}]

        # A read that no longer holds at commit aborts the transaction.
        tx2 = db.transaction()
        await tx2._start()
        await tx2.get(ACCOUNT, 1)
        await db.patch([{"id": 1, "balance": 1}], add=["balance"], type=ACCOUNT)
        tx2.upsert({"id": 3, "balance": 1}, type=ACCOUNT)
        with pytest.raises(Aborted):
            await tx2.commit()


@pytest.mark.asyncio
async def test_an_async_watch_resumes_across_two_server_kills(
    restartable: Callable[..., Restartable],
) -> None:
    srv = restartable()
    with protobase.Client(srv.addr) as c:
        c.apply_schema([SCHEMA_DIR])
    srv.write(range(1, 40_001))
    seen: list[int] = []
    async with protobase.aio.Client(srv.addr) as db:
        w = db.watch(USER, start="oldest", timeout=300)
        async with w:
            async for ch in w:
                seen.append(ch.key["id"])
                if len(seen) == 15_000:
                    srv.kill_and_restart()
                    srv.write(range(40_001, 70_001))
                elif len(seen) == 50_000:
                    srv.kill_and_restart()
                    srv.write(range(70_001, N + 1))
                elif len(seen) == N:
                    break
        assert w.reconnects >= 2
    assert seen == list(range(1, N + 1))


@pytest.mark.asyncio
async def test_linger_wait_durable_and_the_decorator(server: Server) -> None:
    async with await connect(server) as db:
        async with db.writer("upsert", linger=0.01) as w:
            await w.write({"id": 1, "balance": 5}, type=ACCOUNT)
            # Nothing but the linger timer sends this batch.
            assert await w.wait_durable(1, timeout=60)
            assert w.durable == 1

        @db.transactional(max_attempts=20)
        async def add(tx: protobase.aio.Transaction, id: int, amount: int) -> int:
            a = await tx.get(ACCOUNT, id)
            assert a is not None
            tx.update({**a, "balance": a["balance"] + amount}, type=ACCOUNT)
            return int(a["balance"]) + amount

        results = await asyncio.gather(*(add(1, 1) for _ in range(4)))
        assert sorted(results) == [6, 7, 8, 9]


@pytest.mark.asyncio
async def test_an_open_search_sends_as_queries_come(server: Server) -> None:
    async with await connect(server) as db:
        await db.insert([{"id": i, "name": f"u{i}"} for i in range(1, 21)], type=USER)
        s = db.open_search()

        async def send() -> list[range]:
            sent = [await s.send([select(USER, eq("id", i)) for i in range(1, 11)])]
            sent.append(await s.send([select(USER, eq("id", i)) for i in range(11, 21)]))
            sent.append(await s.send([select(USER, "nope = 1")]))
            await s.close()
            return sent

        async def receive() -> dict[int, Any]:
            return {r.index: r.records or r.error async for r in s.results()}

        sent, got = await asyncio.gather(send(), receive())
        assert [list(r) for r in sent] == [list(range(10)), list(range(10, 20)), [20]]
        assert all(got[i] == [{"id": i + 1, "name": f"u{i + 1}"}] for i in range(20))
        assert isinstance(got[20], InvalidArgument)
        with pytest.raises(ValueError):
            await s.send([select(USER)])
