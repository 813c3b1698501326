"""The asyncio client of Protobase, on ``grpc.aio``: the API of ``protobase.Client``.

::

    import protobase.aio

    async with protobase.aio.Client("127.0.0.1:7070") as db:
        async with db.writer("insert") as w:
            await w.write({"id": 1, "name": "Ann"}, type="shop.User")
        async for r in db.search([protobase.select("shop.User", "id = 1")]):
            print(r.records)
        async for c in db.watch("shop.User", start="oldest"):
            print(c.op, c.record)

Queries, conditions, records, results and exceptions are those of
``protobase``.
"""

from protobase.aio._client import Client
from protobase.aio._reads import Scan, Search, Watch
from protobase.aio._transaction import Transaction
from protobase.aio._writer import Writer

__all__ = ["Client", "Scan", "Search", "Transaction", "Watch", "Writer"]
