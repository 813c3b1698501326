"""Safe concurrent updates: versions, conditional writes, patches and transactions.

Run a server (``make serve`` at the repository root), then:

    python examples/concurrency.py [HOST:PORT]
"""

from __future__ import annotations

import sys
import threading

import protobase
from protobase import Aborted, Transaction, if_key, if_query, if_record

BANK = """
syntax = "proto3";
package bank;
import "protobase/v1/options.proto";

message Account {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "owner" } };
  int64 id = 1;
  string owner = 2;
  int64 balance = 3;
  int64 visits = 4;
}
"""
ACCOUNT = "bank.Account"


def main(addr: str) -> None:
    with protobase.Client(addr) as db:
        db.apply_schema({"bank.proto": BANK}, add=True)  # beside the files the server holds
        # Start from accounts 1 and 2 and no account 3, in one atomic batch
        # (a with-block transaction commits once, at its end).
        with db.transaction() as tx:
            if tx.get(ACCOUNT, 3) is not None:
                tx.remove({"id": 3}, type=ACCOUNT)
            tx.upsert(
                {"id": 1, "owner": "ann", "balance": 100},
                {"id": 2, "owner": "bob", "balance": 50},
                type=ACCOUNT,
            )

        # Versions: every read can return them; 0 means "no such record".
        ann, nobody = db.get_versioned(ACCOUNT, [1, 99])
        print("ann:", ann.record, "version > 0:", ann.version > 0, "| 99:", nobody)

        # A conditional write: replace ann's record only if it is still the
        # version read. A second writer holding the same version loses.
        db.apply(
            [{**ann.record, "balance": 90}],
            op="update",
            type=ACCOUNT,
            conditions=[if_record(0, version=ann.version)],
        )
        try:
            db.apply(
                [{**ann.record, "balance": 80}],
                op="update",
                type=ACCOUNT,
                conditions=[if_record(0, version=ann.version)],
            )
        except Aborted as e:
            newer = e.version is not None and e.version > ann.version
            print(f"conflict: condition {e.condition} found a newer version: {newer}")

        # Conditions on other records than the batch's: a key (account 2
        # still holds 50 or more) and a query (cy has no account yet).
        db.apply(
            [{"id": 3, "owner": "cy", "balance": 0}],
            op="insert",
            type=ACCOUNT,
            conditions=[
                if_key(db.key_record(ACCOUNT, 2), filter="balance >= 50"),
                if_query(ACCOUNT, 'owner = "cy"', count=0),
            ],
        )

        # Patches change some fields and keep the rest; add makes counters.
        db.patch([{"id": 2, "owner": "bobby"}], fields=["owner"], type=ACCOUNT)

        def visit() -> None:
            for _ in range(50):
                db.patch([{"id": 2, "visits": 1}], add=["visits"], type=ACCOUNT)

        threads = [threading.Thread(target=visit) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("bob:", db.get(ACCOUNT, [2]).records[0])

        # A transaction: reads record what they saw, writes commit as one
        # batch on condition that none of it changed; a conflict runs the
        # function again (so it must have no other effects).
        @db.transactional(max_attempts=50)
        def transfer(tx: Transaction, src: int, dst: int, amount: int) -> int:
            a, b = tx.get_many(ACCOUNT, [src, dst])
            if a is None or b is None:
                raise LookupError("no such account")
            if a.get("balance", 0) < amount:
                raise ValueError("insufficient funds")
            a["balance"] = a.get("balance", 0) - amount
            b["balance"] = b.get("balance", 0) + amount
            tx.update(a, b, type=ACCOUNT)
            return int(a["balance"])

        def pay() -> None:
            for _ in range(10):
                transfer(1, 3, 1)

        threads = [threading.Thread(target=pay) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            transfer(2, 1, 1000)
        except ValueError as e:
            print("refused:", e)
        balances = db.get(ACCOUNT, [1, 2, 3]).records
        print("balances:", [a.get("balance", 0) for a in balances])

        # A read-only transaction commits its reads alone: it fails if the
        # sum it computed no longer holds.
        total = db.transact(lambda tx: sum(a.get("balance", 0) for a in tx.query(ACCOUNT)))
        print("total:", total)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:7070")
