"""A watch resumes on its own across server kills: every change once, in order."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from conftest import SCHEMA_DIR, Restartable

import protobase
from protobase import OutOfRange, Position, QueryError

USER = "pytest.shop.User"
N = 100_000
DEADLINE = 300.0  # a watch that hangs fails the test instead


def test_a_watch_resumes_across_two_server_kills(restartable: Callable[..., Restartable]) -> None:
    srv = restartable()
    with protobase.Client(srv.addr) as c:
        c.apply_schema([SCHEMA_DIR])
    srv.write(range(1, 40_001))
    seen: list[int] = []
    with protobase.Client(srv.addr) as c:
        w = c.watch(USER, start="oldest", timeout=DEADLINE)
        for ch in w:
            seen.append(ch.key["id"])
            if len(seen) == 15_000:  # 25,000 changes still to come, some in flight
                srv.kill_and_restart()
                srv.write(range(40_001, 70_001))
            elif len(seen) == 50_000:
                srv.kill_and_restart()
                srv.write(range(70_001, N + 1))
            elif len(seen) == N:
                break
        assert w.reconnects >= 2
    assert seen == list(range(1, N + 1))


def test_a_resume_point_trimmed_away_is_raised(restartable: Callable[..., Restartable]) -> None:
    srv = restartable("--watch-retention-bytes", "1")
    with protobase.Client(srv.addr) as c:
        c.apply_schema([SCHEMA_DIR])
    srv.write(range(1, 3))
    with protobase.Client(srv.addr) as c:
        w = c.watch(USER, start="oldest", batch_size=1, timeout=DEADLINE)
        assert next(w).key == {"id": 1}
        resume = w.position
        assert resume is not None
        srv.kill_and_restart()
        # The log is trimmed in the background (once a second): write and
        # wait until a start at the watch's resume point is refused.
        deadline = time.monotonic() + 60
        n = 3
        while True:
            srv.write(range(n, n + 10))
            n += 10
            with protobase.Client(srv.addr) as probe:
                try:
                    with probe.watch(USER, start=resume, resume=False, timeout=10) as pw:
                        next(pw)
                except OutOfRange:
                    break
            assert time.monotonic() < deadline, "the change log was never trimmed"
            time.sleep(0.2)  # polls the trimmer's progress
        got: list[int] = []
        with pytest.raises(OutOfRange) as ei:
            for ch in w:  # what was received before the kill, then the refusal
                got.append(ch.key["id"])
        assert isinstance(ei.value, QueryError) and ei.value.oldest is not None
        assert ei.value.oldest > Position(resume.commit) and got in ([], [2])
