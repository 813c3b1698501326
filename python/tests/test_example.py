"""The example script runs against a real server and prints what it promises."""

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
    assert "durable: WriteResult(batches=1, records=999" in out
    assert "refused: ALREADY_EXISTS batch 0 record 0 type shop.User" in out
    assert "query 1: 1 matches [{'id': 2, 'name': 'Bob'" in out
    assert "get: ['Ann', 'Bob'] missing positions: [2]" in out
    assert "scan: 117 records, count 117" in out
    assert "pages: [50, 50, 10]" in out
