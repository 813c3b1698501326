"""Benchmark the Python client beside the Go client, in one run, on one server.

Builds the repository's server and the Go side (bench/goclient), starts a
durable server (fsync on) on loopback with a temporary data directory,
and measures, alternating Python and Go in each of --runs rounds:

- ingest: inserts of ~100-byte records at batch 1,000 through a writer,
  the clock covering encoding, batching and the wait until every record is
  durable; records given as messages (schema classes in Python, dynamicpb
  in Go), and pre-encoded (bytes in Python, Any in Go);
- search: primary-key lookups, 1,000 queries per request on one Search
  stream, each request sent once the results of the one before arrived;
- get: the same keys read with Get, 1,000 keys per call.

Prints the medians as a Markdown table (and --json FILE). Run from the
repository root: python/.venv/bin/python python/bench/bench.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "tests"))

from conftest import start_server  # noqa: E402

import protobase  # noqa: E402
from protobase import eq, select  # noqa: E402

ITEM = "protobase_lab.Item"
NOTE = "lorem ipsum dolor sit amet, consectetur adipiscing"


def build(tmp: Path) -> tuple[Path, Path]:
    server, goclient = tmp / "protobase", tmp / "goclient"
    for out, pkg in ((server, "./cmd/protobase"), (goclient, "./python/bench/goclient")):
        subprocess.run(["go", "build", "-o", str(out), pkg], cwd=REPO, check=True)
    return server, goclient


def item_fields(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"name-{i % 100000}",
        "email": f"user{i}@example.com",
        "created": 1700000000000 + i,
        "note": NOTE,
    }


def py_ingest(c: protobase.Client, kind: str, n: int, batch: int, first: int) -> float:
    cls = c.schema().message_class(ITEM)
    msgs = [cls(**item_fields(first + i)) for i in range(n)]
    records: list[Any]
    if kind == "bytes":
        records = [m.SerializeToString() for m in msgs]
    elif kind == "dicts":
        records = [item_fields(first + i) for i in range(n)]
    else:
        records = msgs
    start = time.perf_counter()
    with c.writer("insert", max_records=batch) as w:
        w.write_many(records, type=ITEM)
    return n / (time.perf_counter() - start)


def py_search(c: protobase.Client, n: int, batch: int, ids: int) -> float:
    start = time.perf_counter()
    s = c.open_search(decode="any")  # the records as stored: the transport measured
    results = s.results()
    k = 0
    for done in range(0, n, batch):
        m = min(batch, n - done)
        s.send([select(ITEM, eq("id", (k + j) * 7919 % ids)) for j in range(m)])
        k += m
        for _ in range(m):
            r = next(results)
            if r.error is not None or len(r.records) != 1:
                raise RuntimeError(f"lookup {r.index} failed: {r.error or r.records}")
    s.close()
    for _ in results:
        pass
    return n / (time.perf_counter() - start)


def py_get(c: protobase.Client, n: int, batch: int, ids: int) -> float:
    start = time.perf_counter()
    k = 0
    for done in range(0, n, batch):
        m = min(batch, n - done)
        r = c.get(ITEM, [(k + j) * 7919 % ids for j in range(m)], decode="any")
        k += m
        if r.missing or len(r.records) != m:
            raise RuntimeError(f"get: keys missing at positions {r.missing}")
    return n / (time.perf_counter() - start)


def go(goclient: Path, addr: str, *args: str) -> float:
    out = subprocess.run(
        [str(goclient), "-addr", addr, *args], check=True, capture_output=True, text=True
    ).stdout
    return float(json.loads(out)["per_sec"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000, help="records per ingest run")
    ap.add_argument("--lookups", type=int, default=100_000, help="lookups per search run")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", help="also write the medians as JSON to this file")
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        server_bin, goclient = build(tmp)
        server = start_server(server_bin, tmp / "data")
        try:
            rows = measure(server.addr, goclient, a)
        finally:
            server.stop()
    print(f"records/s or lookups/s, median of {a.runs} runs, batch {a.batch}; the ratio is")
    print("the median of the runs' ratios (Python and Go measured one after the other):\n")
    print("| workload | Python | Go | Python / Go |\n|---|---:|---:|---:|")
    for name, (py, gov, ratio) in rows.items():
        if gov:
            print(f"| {name} | {py:,.0f} | {gov:,.0f} | {ratio:.2f} |")
        else:
            print(f"| {name} | {py:,.0f} | - | - |")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))


def measure(
    addr: str, goclient: Path, a: argparse.Namespace
) -> dict[str, tuple[float, float, float]]:
    c = protobase.Client(addr)
    c.apply_schema({"protobase_lab/items.proto": (REPO / "bench" / "items.proto").read_text()})
    n, batch = a.records, a.batch
    next_id = 0

    def ids(count: int) -> int:
        nonlocal next_id
        next_id += count
        return next_id - count

    # Load the ids the lookups read, unmeasured.
    py_ingest(c, "bytes", a.lookups, batch, ids(a.lookups))
    series: dict[str, list[Callable[[], float]]] = {
        "ingest, messages": [
            lambda: py_ingest(c, "messages", n, batch, ids(n)),
            lambda: go(
                goclient,
                addr,
                "-mode",
                "ingest",
                "-n",
                str(n),
                "-batch",
                str(batch),
                "-first-id",
                str(ids(n)),
            ),
        ],
        "ingest, pre-encoded": [
            lambda: py_ingest(c, "bytes", n, batch, ids(n)),
            lambda: go(
                goclient,
                addr,
                "-mode",
                "ingest-bytes",
                "-n",
                str(n),
                "-batch",
                str(batch),
                "-first-id",
                str(ids(n)),
            ),
        ],
        "ingest, dicts (Python only)": [
            lambda: py_ingest(c, "dicts", n // 4, batch, ids(n // 4)),
            lambda: 0.0,
        ],
        "search, primary-key lookups": [
            lambda: py_search(c, a.lookups, batch, a.lookups),
            lambda: go(
                goclient,
                addr,
                "-mode",
                "search",
                "-n",
                str(a.lookups),
                "-batch",
                str(batch),
                "-ids",
                str(a.lookups),
            ),
        ],
        "get, primary keys": [
            lambda: py_get(c, a.lookups, batch, a.lookups),
            lambda: go(
                goclient,
                addr,
                "-mode",
                "get",
                "-n",
                str(a.lookups),
                "-batch",
                str(batch),
                "-ids",
                str(a.lookups),
            ),
        ],
    }
    got: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in series}
    for run in range(a.runs):
        for name, (py, gofn) in series.items():
            got[name][0].append(py())
            got[name][1].append(gofn())
            print(
                f"run {run + 1}: {name}: Python {got[name][0][-1]:,.0f}/s, "
                f"Go {got[name][1][-1]:,.0f}/s",
                file=sys.stderr,
            )
    c.close()
    return {
        k: (
            statistics.median(p),
            statistics.median(g),
            statistics.median(x / y if y else 0.0 for x, y in zip(p, g, strict=True)),
        )
        for k, (p, g) in got.items()
    }


if __name__ == "__main__":
    main()
