"""Safe concurrent updates: versions, conditional batches, patches and transactions."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from conftest import Server

import protobase
from protobase import ConflictError, WriteError, eq, if_key, if_query, if_record, select

ACCOUNT = "pytest.bank.Account"
BANK = """
syntax = "proto3";
package pytest.bank;
import "protobase/v1/options.proto";

message Account {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "owner" }
  };
  int64 id = 1;
  string owner = 2;
  int64 balance = 3;
  int64 visits = 4;
  Address address = 5;
  repeated string tags = 6;
  optional int32 level = 7;
  double rate = 8;
}

message Address {
  string city = 1;
  Geo geo = 2;
}

message Geo {
  double lat = 1;
  int32 floor = 2;
}
"""


@pytest.fixture
def bank(server: Server) -> Iterator[protobase.Client]:
    """A client of a fresh server with accounts 1..3 (owner a1.., balance 10, visits 1)."""
    with protobase.Client(server.addr) as c:
        c.apply_schema({"bank.proto": BANK})
        c.insert(
            [{"id": i, "owner": f"a{i}", "balance": 10, "visits": 1} for i in (1, 2, 3)],
            type=ACCOUNT,
        )
        yield c


def account(c: protobase.Client, id: int) -> dict[str, Any]:
    got = c.get_versioned(ACCOUNT, [id], decode="dict")[0]
    assert got.record is not None, f"no account {id}"
    return dict(got.record)


def in_threads(n: int, fn: Callable[[], None]) -> None:
    """Run fn on n threads at once and re-raise the first failure."""
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def run() -> None:
        try:
            start.wait()
            fn()
        except BaseException as e:  # reported below, on the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


# ------------------------------------------------------------------ versions


def test_reads_return_versions(bank: protobase.Client) -> None:
    first = bank.get(ACCOUNT, [1, 2, 3], versions=True)
    assert len(set(first.versions)) == 1  # one batch wrote them
    v0 = first.versions[0]
    assert v0 > 0

    pos = bank.update([{"id": 2, "owner": "b", "balance": 5}], type=ACCOUNT).position
    assert pos > v0

    got = bank.get_versioned(ACCOUNT, [3, 2, 99], decode="dict")
    assert [(g.record or {}).get("owner") for g in got] == ["a3", "b", None]
    assert [g.version for g in got] == [v0, pos, 0]

    assert bank.get(ACCOUNT, [2, 99], versions=True).versions == [pos]  # the records found
    assert bank.get(ACCOUNT, [2]).versions == []  # not asked for

    page = bank.query(ACCOUNT, "balance >= 0", versions=True)
    assert page.versions == [v0, pos, v0]
    assert bank.query(select(ACCOUNT), page_size=2, versions=True).versions == [v0, pos]
    assert [p.versions for p in bank.pages(ACCOUNT, page_size=2, versions=True)] == [
        [v0, pos],
        [v0],
    ]

    scan = bank.scan(ACCOUNT, versions=True, decode="dict")
    assert [(r["id"], v) for r, v in scan.versioned()] == [(1, v0), (2, pos), (3, v0)]
    scan = bank.scan(select(ACCOUNT, "id = 2"), versions=True)
    assert [scan.version for _ in scan] == [pos]

    queries = [select(ACCOUNT, "id >= 2"), select(ACCOUNT, "id = 1", versions=True)]
    results = {r.index: r for r in bank.search(queries)}
    assert results[0].versions == []
    assert results[1].versions == [v0]
    results = {r.index: r for r in bank.search(queries, versions=True)}
    assert results[0].versions == [pos, v0]
    assert not queries[0].versions  # the caller's query is left as it was


# ---------------------------------------------------------------- conditions


def test_condition_that_holds_applies_the_batch(bank: protobase.Client) -> None:
    v = bank.get_versioned(ACCOUNT, [1])[0].version
    pos = bank.apply(
        [{"id": 1, "owner": "a1", "balance": 11}, {"id": 4, "owner": "new"}],
        ops=["update", "insert"],
        type=ACCOUNT,
        conditions=[
            if_record(0, version=v),
            if_record(1, version=0),
            if_key(bank.key_record(ACCOUNT, 2), filter="balance >= 10"),
            if_query(ACCOUNT, 'owner = "a3"', count=1),
        ],
    )
    got = bank.get_versioned(ACCOUNT, [1, 4], decode="dict")
    assert [g.version for g in got] == [pos, pos]
    assert got[0].record == {"id": 1, "owner": "a1", "balance": 11}


def test_failing_condition_raises_with_details_and_applies_nothing(
    bank: protobase.Client,
) -> None:
    v = bank.get_versioned(ACCOUNT, [1])[0].version
    moved = bank.update([{"id": 2, "owner": "a2", "balance": 7}], type=ACCOUNT).position

    with pytest.raises(ConflictError) as ei:
        bank.apply(
            [{"id": 1, "owner": "a1", "balance": 0}, {"id": 5, "owner": "five"}],
            ops=["update", "insert"],
            type=ACCOUNT,
            conditions=[
                if_record(0, version=v),  # holds
                if_key(bank.key_record(ACCOUNT, 2), version=v),  # account 2 moved on
            ],
        )
    e = ei.value
    assert isinstance(e, WriteError)  # a ConflictError is a WriteError
    assert e.code == grpc.StatusCode.ABORTED
    assert (e.condition, e.version, e.batch, e.record) == (1, moved, 0, None)
    assert e.type == ACCOUNT
    # Nothing of the batch applied: account 1 untouched, account 5 absent.
    assert account(bank, 1)["balance"] == 10
    assert bank.get_versioned(ACCOUNT, [5])[0] == (None, 0)

    with pytest.raises(ConflictError) as ei:
        bank.apply(
            conditions=[if_record(0, version=0)], records=[{"id": 1}], type=ACCOUNT, op="remove"
        )
    assert (ei.value.condition, ei.value.version, ei.value.record) == (0, v, 0)

    # A query condition reports the highest version among the matches.
    with pytest.raises(ConflictError) as ei:
        bank.apply(conditions=[if_query(ACCOUNT, "balance >= 0", count=2)])
    assert (ei.value.condition, ei.value.version) == (0, moved)
    assert "3" in (ei.value.reason or "")  # the count found

    # A filter that does not hold.
    with pytest.raises(ConflictError) as ei:
        bank.apply(conditions=[if_key(bank.key_record(ACCOUNT, 2), filter="balance > 7")])
    assert ei.value.condition == 0


def test_malformed_conditions_are_refused(bank: protobase.Client) -> None:
    with pytest.raises(ValueError, match="needs version or filter"):
        if_record(0)
    with pytest.raises(ValueError, match="needs count or max_version"):
        if_query(ACCOUNT)
    with pytest.raises(ValueError, match="has 1 fields"):
        bank.key_record(ACCOUNT, (1, 2))
    with pytest.raises(ValueError, match="needs op"):
        bank.apply([{"id": 1}], type=ACCOUNT)
    with pytest.raises(WriteError) as ei:
        bank.apply(
            [{"id": 1, "owner": "x"}],
            op="update",
            type=ACCOUNT,
            conditions=[if_record(0, version=1), if_record(3, version=0)],
        )
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert ei.value.condition == 1
    assert not isinstance(ei.value, ConflictError)
    assert account(bank, 1)["owner"] == "a1"


# ------------------------------------------------------------------- patches


def test_patch_sets_one_field_and_keeps_the_rest(bank: protobase.Client) -> None:
    before = bank.get_versioned(ACCOUNT, [1])[0].version
    pos = bank.patch([{"id": 1, "owner": "ann", "balance": 999}], fields=["owner"], type=ACCOUNT)
    got = bank.get_versioned(ACCOUNT, [1], decode="dict")[0]
    assert got.record == {"id": 1, "owner": "ann", "balance": 10, "visits": 1}
    assert got.version == pos > before

    with pytest.raises(WriteError) as ei:
        bank.patch([{"id": 42, "owner": "x"}], fields=["owner"], type=ACCOUNT)
    assert ei.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(WriteError) as ei:
        bank.patch([{"id": 1, "owner": "x"}], add=["owner"], type=ACCOUNT)
    assert (ei.value.code, ei.value.field) == (grpc.StatusCode.INVALID_ARGUMENT, "owner")


def test_add_counter_from_8_threads_is_exact(bank: protobase.Client) -> None:
    def visit() -> None:
        for _ in range(200):
            bank.patch([{"id": 1, "visits": 1}], add=["visits"], type=ACCOUNT)

    in_threads(8, visit)
    assert account(bank, 1) == {"id": 1, "owner": "a1", "balance": 10, "visits": 1 + 8 * 200}


# -------------------------------------------------------------- transactions


def test_transaction_counter_from_8_threads_is_exact(bank: protobase.Client) -> None:
    attempts = [0]

    @bank.transactional(max_attempts=100)
    def deposit(tx: protobase.Transaction, id: int, amount: int) -> int:
        attempts[0] += 1
        acct = tx.get(ACCOUNT, id, decode="dict")
        assert acct is not None
        acct["balance"] = acct.get("balance", 0) + amount
        tx.update(acct, type=ACCOUNT)
        return int(acct["balance"])

    def work() -> None:
        for _ in range(100):
            deposit(1, 1)

    in_threads(8, work)
    assert account(bank, 1)["balance"] == 10 + 8 * 100
    assert attempts[0] > 8 * 100  # some ran again after a conflict


def test_transaction_moves_money_atomically(bank: protobase.Client) -> None:
    def move(tx: protobase.Transaction) -> None:
        src, dst, gone = tx.get_many(ACCOUNT, [1, 2, 77], decode="dict")
        assert src is not None and dst is not None and gone is None
        src["balance"] -= 4
        dst["balance"] += 4
        tx.update(src, dst, type=ACCOUNT)
        tx.insert({"id": 77, "owner": "log", "balance": 4}, type=ACCOUNT)
        tx.patch({"id": 3, "visits": 1}, add=["visits"], type=ACCOUNT)

    bank.transact(move)
    got = bank.get(ACCOUNT, [1, 2, 3, 77], decode="dict").records
    assert [(a["balance"], a.get("visits", 0)) for a in got] == [
        (6, 1),
        (14, 1),
        (10, 2),
        (4, 0),
    ]


def test_transaction_retries_until_exhausted(bank: protobase.Client) -> None:
    runs = [0]

    def contended(tx: protobase.Transaction) -> None:
        runs[0] += 1
        acct = tx.get(ACCOUNT, 1, decode="dict")
        assert acct is not None
        # Another writer changes the account between the read and the commit.
        bank.patch([{"id": 1, "visits": 1}], add=["visits"], type=ACCOUNT)
        tx.update({**acct, "owner": "lost"}, type=ACCOUNT)

    with pytest.raises(ConflictError) as ei:
        bank.transact(contended, max_attempts=3, base_delay=0.001)
    assert runs[0] == 3
    assert ei.value.attempts == 3
    assert ei.value.condition == 0
    acct = account(bank, 1)
    assert (acct["owner"], acct["visits"]) == ("a1", 4)  # no commit; 3 rival writes


def test_with_block_commits_once_and_does_not_retry(bank: protobase.Client) -> None:
    with bank.transaction() as tx:
        acct = tx.get(ACCOUNT, 2, decode="dict")
        assert acct is not None
        tx.update({**acct, "owner": "b2"}, type=ACCOUNT)
    assert tx.position > 0
    assert account(bank, 2)["owner"] == "b2"

    with pytest.raises(ConflictError), bank.transaction() as tx:
        tx.get(ACCOUNT, 2)
        bank.patch([{"id": 2, "owner": "rival"}], fields=["owner"], type=ACCOUNT)
        tx.update({"id": 2, "owner": "mine"}, type=ACCOUNT)
    assert account(bank, 2)["owner"] == "rival"

    with pytest.raises(RuntimeError), bank.transaction() as tx:
        tx.update({"id": 2, "owner": "never"}, type=ACCOUNT)
        raise RuntimeError("abandoned")
    assert account(bank, 2)["owner"] == "rival"


def test_transaction_query_conflicts_with_a_new_match(bank: protobase.Client) -> None:
    tx = bank.transaction()
    rich = tx.query(ACCOUNT, "balance >= 10", decode="dict")
    assert [a["id"] for a in rich] == [1, 2, 3]
    assert tx.count(ACCOUNT, "balance >= 100") == 0
    tx.insert({"id": 10, "owner": "audit", "balance": 0}, type=ACCOUNT)
    bank.insert([{"id": 9, "owner": "phantom", "balance": 500}], type=ACCOUNT)
    with pytest.raises(ConflictError) as ei:
        tx.commit()
    assert ei.value.condition in (0, 1)
    assert bank.get(ACCOUNT, [10]).missing == [0]


def test_read_only_transaction_checks_what_it_read(bank: protobase.Client) -> None:
    def total(tx: protobase.Transaction) -> int:
        return sum(a.get("balance", 0) for a in tx.query(ACCOUNT, decode="dict"))

    assert bank.transact(total) == 30

    tx = bank.transaction()
    assert total(tx) == 30
    bank.patch([{"id": 3, "balance": 1}], add=["balance"], type=ACCOUNT)
    with pytest.raises(ConflictError):
        tx.commit()


def test_error_from_a_stale_read_runs_the_function_again(bank: protobase.Client) -> None:
    runs = [0]

    def check(tx: protobase.Transaction) -> str:
        runs[0] += 1
        acct = tx.get(ACCOUNT, 1, decode="dict")
        assert acct is not None
        if runs[0] == 1:
            bank.update([{**acct, "owner": "fixed"}], type=ACCOUNT)
        if acct["owner"] != "fixed":
            raise LookupError("not fixed yet")  # true of a read that no longer holds
        return str(acct["owner"])

    assert bank.transact(check, base_delay=0.001) == "fixed"
    assert runs[0] == 2

    def fails(tx: protobase.Transaction) -> None:
        tx.get(ACCOUNT, 1)
        raise LookupError("the function's own")

    with pytest.raises(LookupError, match="own"):
        bank.transact(fails)


def test_patches_of_one_transaction_share_their_fields(bank: protobase.Client) -> None:
    tx = bank.transaction()
    tx.patch({"id": 1, "visits": 1}, add=["visits"], type=ACCOUNT)
    with pytest.raises(ValueError, match="carries one patch"):
        tx.patch({"id": 2, "owner": "x"}, fields=["owner"], type=ACCOUNT)
    tx.patch({"id": 2, "visits": 5}, add=["visits"], type=ACCOUNT)  # the same patch
    tx.commit()
    assert [a["visits"] for a in bank.get(ACCOUNT, [1, 2], decode="dict").records] == [2, 6]


def test_transaction_reads_its_own_writes(bank: protobase.Client) -> None:
    def fn(tx: protobase.Transaction) -> None:
        tx.update({"id": 1, "owner": "one"}, type=ACCOUNT)
        assert tx.get(ACCOUNT, 1, decode="dict") == {"id": 1, "owner": "one"}
        tx.remove({"id": 2}, type=ACCOUNT)
        assert tx.get(ACCOUNT, 2) is None
        tx.insert({"id": 50, "owner": "fifty"}, type=ACCOUNT)
        found = tx.query(select(ACCOUNT, eq("id", 50)), decode="dict")  # a lookup
        assert found == [{"id": 50, "owner": "fifty"}]
        # A patch of a record not read yet: read then, patched in the client.
        tx.patch({"id": 3, "visits": 2, "owner": "x"}, add=["visits"], type=ACCOUNT)
        assert tx.get(ACCOUNT, 3, decode="dict") == {
            "id": 3,
            "owner": "a3",
            "balance": 10,
            "visits": 3,
        }
        tx.patch({"id": 3, "visits": 10}, add=["visits"], type=ACCOUNT)
        assert (tx.get(ACCOUNT, 3, decode="dict") or {})["visits"] == 13

    bank.transact(fn)
    got = {a["id"]: a for a in bank.scan(ACCOUNT, decode="dict")}
    assert sorted(got) == [1, 3, 50]
    assert got[3]["visits"] == 13 and got[1] == {"id": 1, "owner": "one"}


def test_a_record_read_twice_is_read_once(bank: protobase.Client) -> None:
    tx = bank.transaction()
    first = tx.get(ACCOUNT, 1, decode="dict")
    bank.patch([{"id": 1, "owner": "rival"}], fields=["owner"], type=ACCOUNT)
    assert tx.get(ACCOUNT, {"id": 1}, decode="dict") == first  # another spelling, same record
    tx.upsert({"id": 9}, type=ACCOUNT)
    with pytest.raises(ConflictError) as ei:
        tx.commit()
    assert ei.value.condition == 0


def test_query_that_fills_its_limit_names_its_records(bank: protobase.Client) -> None:
    # Accounts 1 and 2 fill the limit; account 1 leaving the matches lets 3
    # in with the same count and the same highest version (1, 2 and 3 were
    # written by one batch): only a key condition on 1 sees it.
    tx = bank.transaction()
    assert [a["id"] for a in tx.query(ACCOUNT, "balance >= 10", limit=2, decode="dict")] == [1, 2]
    tx.insert({"id": 20, "owner": "audit"}, type=ACCOUNT)
    before = bank.query(ACCOUNT, "balance >= 10", limit=2, versions=True).versions
    bank.patch([{"id": 1, "balance": -1}], fields=["balance"], type=ACCOUNT)
    after = bank.query(ACCOUNT, "balance >= 10", limit=2, versions=True, decode="dict")
    assert [a["id"] for a in after.records] == [2, 3]
    assert (len(after.versions), max(after.versions)) == (len(before), max(before))
    with pytest.raises(ConflictError) as ei:
        tx.commit()
    assert ei.value.condition == 1  # the key condition of account 1, after the query's
    assert bank.get(ACCOUNT, [20]).missing == [0]


def test_patch_read_back_in_a_transaction_is_what_the_server_stores(
    bank: protobase.Client,
) -> None:
    bank.upsert(
        [
            {"id": 1, "owner": "a", "address": {"city": "Oslo", "geo": {"lat": 1.5}}},
            {"id": 2, "owner": "b", "tags": ["x"], "level": 0, "rate": 0.25},
            {"id": 3, "owner": "c", "visits": 5},
        ],
        type=ACCOUNT,
    )
    fields = ["address.city", "address.geo.floor", "tags", "level", "owner"]
    add = ["visits", "rate", "balance"]
    patches: list[dict[str, Any]] = [
        {"id": 1, "address": {"geo": {"floor": 3}}, "tags": ["p", "q"], "visits": 1},
        {"id": 2, "rate": 0.5, "balance": -4},  # clears tags, level and owner
        {"id": 3, "address": {"city": "Rome"}, "level": 7, "owner": "cc", "visits": -5},
    ]
    read_back: dict[int, Any] = {}

    def fn(tx: protobase.Transaction) -> None:
        tx.get_many(ACCOUNT, [1, 2])  # 1 and 2 read before the patch, 3 after
        tx.patch(*patches, fields=fields, add=add, type=ACCOUNT)
        for i in (1, 2, 3):
            read_back[i] = tx.get(ACCOUNT, i, decode="dict")

    bank.transact(fn)
    stored = {a["id"]: a for a in bank.scan(ACCOUNT, decode="dict")}
    assert read_back == stored
    assert stored[1]["address"] == {"geo": {"lat": 1.5, "floor": 3}}
    assert stored[2] == {"id": 2, "rate": 0.75, "balance": -4}  # visits: in neither
    assert stored[3]["address"] == {"city": "Rome"} and "visits" not in stored[3]


def test_transact_commits_the_transaction_itself(bank: protobase.Client) -> None:
    def fn(tx: protobase.Transaction) -> None:
        tx.update({"id": 1}, type=ACCOUNT)
        tx.commit()

    with pytest.raises(ValueError, match="transact commits"):
        bank.transact(fn)
    assert account(bank, 1)["owner"] == "a1"
