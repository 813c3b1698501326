"""Quick start: a schema, a batch of records, and every way to read them back.

Run a server (``make serve`` at the repository root), then:

    python examples/quickstart.py [HOST:PORT]

No protoc is needed: the record classes come from the server's schema.
"""

from __future__ import annotations

import sys

import protobase
from protobase import WriteError, eq, select

SHOP = """
syntax = "proto3";
package shop;
import "protobase/v1/options.proto";

message User {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "email" unique: true }
    index: { fields: "name" }
  };
  int64 id = 1;
  string name = 2;
  string email = 3;
  int32 age = 4;
}
"""


def main(addr: str) -> None:
    with protobase.Client(addr) as db:
        # The README's shop.proto, added beside whatever else the server
        # holds (add=True): on the README's server it changes nothing.
        plan = db.apply_schema({"shop.proto": SHOP}, add=True)
        print("schema version", plan.version, "types added:", list(plan.plan.types_added))

        # Write: dicts (or messages) go through a batching writer; leaving
        # the block waits until every record is durable. Upserts, so that
        # the example runs again; ids from 1000, beside the docs' users.
        User = db.schema().message_class("shop.User")
        with db.writer("upsert", max_records=1000) as w:
            w.write(User(id=1000, name="Ida", email="ida@example.com", age=34))
            w.write(
                {"id": 1001, "name": "Jon", "email": "jon@example.com", "age": 27}, type="shop.User"
            )
            w.write_many(
                (
                    {"id": i, "name": f"user{i}", "email": f"user{i}@example.com", "age": i % 90}
                    for i in range(1002, 2000)
                ),
                type="shop.User",
            )
        print("durable:", w.close())

        # A failed write names the batch, record, type and field.
        try:
            db.insert([{"id": 1000, "name": "Ida again"}], type="shop.User")
        except WriteError as e:
            print(
                f"refused: {e.code.name if e.code else ''} batch {e.batch} record {e.record} "
                f"type {e.type}: {e.reason}"
            )

        # Search: many queries on one stream, text filters or expressions.
        queries = [
            select("shop.User", 'name prefix "user19" and age >= 88', limit=5),
            select("shop.User", eq("id", 1001)),
            select("shop.User", "id >= 1000 and age > 30", count=True),
        ]
        for r in db.search(queries):
            print(f"query {r.index}: {r.count} matches", r.records[:2])

        # Get by primary key, Scan in parallel, Query in pages.
        got = db.get("shop.User", [1000, 1001, 12345])
        print("get:", [u["name"] for u in got.records], "missing positions:", got.missing)
        scan = db.scan("shop.User", "id >= 1000 and age < 10", parallelism=4)
        print("scan:", sum(1 for _ in scan), "records, count", scan.count)
        pages = db.pages("shop.User", "id >= 1000 and age >= 80", page_size=50)
        print("pages:", [len(p.records) for p in pages])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:7070")
