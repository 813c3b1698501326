"""The example scripts run against a real server and print what they promise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import Server

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "quickstart.py"


def test_quickstart_example(server: Server) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), server.addr],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "types added: ['shop.User']" in out
    assert "durable: WriteResult(batches=2, records=1000" in out
    assert "refused: ALREADY_EXISTS batch 0 record 0 type shop.User" in out
    assert "query 0: 2 matches [{'id': 1978, 'name': 'user1978'" in out
    assert "query 1: 1 matches [{'id': 1001, 'name': 'Jon'" in out
    assert "query 2: 650 matches []" in out
    assert "get: ['Ida', 'Jon'] missing positions: [2]" in out
    assert "scan: 110 records, count 110" in out
    assert "pages: [50, 50, 10]" in out


CONCURRENCY = EXAMPLE.with_name("concurrency.py")


def test_concurrency_example(server: Server) -> None:
    def run() -> str:
        return subprocess.run(
            [sys.executable, str(CONCURRENCY), server.addr],
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        ).stdout

    out = run()
    assert (
        "ann: {'id': 1, 'owner': 'ann', 'balance': 100} version > 0: True "
        "| 99: Versioned(record=None, version=0)"
    ) in out
    assert "conflict: condition 0 found a newer version: True" in out
    assert "bob: {'id': 2, 'owner': 'bobby', 'balance': 50, 'visits': 200}" in out
    assert "refused: insufficient funds" in out
    assert "balances: [50, 50, 40]" in out
    assert "total: 140" in out
    assert run() == out  # it starts over each run


AIO = EXAMPLE.with_name("aio.py")


def test_aio_example(server: Server) -> None:
    def run() -> str:
        return subprocess.run(
            [sys.executable, str(AIO), server.addr],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout

    out = run()
    assert "tasks before: 0" in out
    assert "page: ['task 1', 'task 2', 'task 3']" in out
    assert "get: [{'id': 7, 'title': 'task 7'}] missing: [1000]" in out
    assert "not done: 100" in out
    assert "runs added: 5" in out
    assert "change: update {'id': 2, 'title': 'task 2', 'done': True}" in out
    assert "search: [{'id': 2, 'title': 'task 2'}]" in out
    again = run()
    assert "tasks before: 100" in again and "runs added: 5" in again
