"""The watch tests again, on a server whose store is an etcd member (--store etcd).

There the change feed is etcd's watch and positions are etcd revisions; the
client sees the same changes, in the same order, resumed the same way. The
member is the repository's ``protobase-etcd`` (etcd's own server), one per
session; each test's server has a key prefix of its own on it.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, SCHEMA_DIR, first_line, free_port, start_server
from test_watch import (
    test_changes_come_in_commit_order_decoded,
    test_filters_as_text_and_expression_and_many_types,
    test_now_skips_what_was_committed_before,
    test_oldest_starts_at_the_first_change_kept,
    test_records_undecoded_and_without_old_records,
    test_resume_after_the_position_gets_every_later_change_once,
    test_server_refusals_raise_query_error,
)

import protobase

__all__ = [
    "test_changes_come_in_commit_order_decoded",
    "test_filters_as_text_and_expression_and_many_types",
    "test_now_skips_what_was_committed_before",
    "test_oldest_starts_at_the_first_change_kept",
    "test_records_undecoded_and_without_old_records",
    "test_resume_after_the_position_gets_every_later_change_once",
    "test_server_refusals_raise_query_error",
]

_prefixes = itertools.count()


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One etcd member for the session; its client address."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("the tests need Go to build the etcd member")
    out = tmp_path_factory.mktemp("etcd")
    binary = out / "protobase-etcd"
    subprocess.run([go, "build", "-o", str(binary), "./cmd/protobase-etcd"], cwd=REPO, check=True)
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    log = open(out / "member.log", "w")  # noqa: SIM115 (open for the member's life)
    proc = subprocess.Popen(
        [
            str(binary),
            "--name=m",
            f"--data-dir={out / 'data'}",
            f"--listen-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-cluster=m={peer}",
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    line = first_line(proc)
    try:
        if not line.startswith("READY "):
            pytest.fail(f"etcd member did not start ({line!r}): {(out / 'member.log').read_text()}")
        yield client.removeprefix("http://")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture
def client(binary: Path, etcd: str, tmp_path: Path) -> Iterator[protobase.Client]:
    """A client of a fresh server on the etcd member, with the test schema applied."""
    srv = start_server(
        binary,
        tmp_path / "data",
        "--store=etcd",
        f"--etcd-endpoints={etcd}",
        f"--etcd-prefix=/watch{next(_prefixes)}/",
    )
    try:
        with protobase.Client(srv.addr) as c:
            c.apply_schema([SCHEMA_DIR])
            yield c
    finally:
        srv.stop()
