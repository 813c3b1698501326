"""The asyncio client: writes, concurrent reads, a transaction and a change feed.

Run a server (``make serve`` at the repository root), then:

    python examples/aio.py [HOST:PORT]
"""

from __future__ import annotations

import asyncio
import sys

import protobase
import protobase.aio
from protobase import select

TASKS = """
syntax = "proto3";
package tasks;
import "protobase/v1/options.proto";

message Task {
  option (protobase.v1.record) = {primary_key: "id" index: { fields: "done" }};
  int64 id = 1;
  string title = 2;
  bool done = 3;
  int64 runs = 4;
}
"""


async def main(addr: str) -> None:
    async with protobase.aio.Client(addr) as db:
        await db.apply_schema({"tasks.proto": TASKS}, add=True)
        start = (await db.query("tasks.Task", count=True)).count
        print("tasks before:", start)

        # Upserts, so that the example runs again.
        async with db.writer("upsert") as w:
            await w.write_many(
                ({"id": i, "title": f"task {i}"} for i in range(1, 101)), type="tasks.Task"
            )

        # Reads run concurrently on one connection.
        page, found, n = await asyncio.gather(
            db.query("tasks.Task", "id <= 3"),
            db.get("tasks.Task", [7, 1000]),
            db.query("tasks.Task", "done = false", count=True),
        )
        print("page:", [t["title"] for t in page.records])
        print("get:", found.records, "missing:", found.missing_keys)
        print("not done:", n.count)

        # A transaction from several tasks at once: each increment lands once.
        @db.transactional
        async def run(tx: protobase.aio.Transaction, id: int) -> None:
            task = await tx.get("tasks.Task", id)
            assert task is not None
            tx.update({**task, "runs": task.get("runs", 0) + 1}, type="tasks.Task")

        before = (await db.get("tasks.Task", [1])).records[0].get("runs", 0)
        await asyncio.gather(*(run(1) for _ in range(5)))
        after = (await db.get("tasks.Task", [1])).records[0]["runs"]
        print("runs added:", after - before)

        # A change feed after a write's position: every later change that
        # matches arrives, this program's own patch among them. ("now" is
        # when the server opens the feed, which may come after the patch.)
        start = await db.patch([{"id": 2}], fields=["done"], type="tasks.Task")
        watch = db.watch("tasks.Task", "done = true", start=start)
        async with watch:
            await db.patch([{"id": 2, "done": True}], fields=["done"], type="tasks.Task")
            async for change in watch:
                print("change:", change.op, change.record)
                break
        await db.patch([{"id": 2}], fields=["done"], type="tasks.Task")  # undone again

        async for r in db.search([select("tasks.Task", "id = 2")]):
            print("search:", r.records)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:7070"))
