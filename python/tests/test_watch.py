"""Watch: changes in commit order, decoded, filtered, resumed after a position, closed."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import SCHEMA_DIR, start_server

import protobase
from protobase import Change, Position, QueryError, WatchOutOfRange, ge

USER = "pytest.shop.User"
ORDER = "pytest.shop.Order"
DEADLINE = 60.0  # a watch that hangs fails the test instead


def user(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": i, "name": f"user{i}", **extra}


def take(w: protobase.Watch, n: int) -> list[Change]:
    return [next(w) for _ in range(n)]


def summary(changes: list[Change]) -> list[tuple[str, str, Any, Any, Any]]:
    return [(c.op, c.type, c.key, c.record, c.old_record) for c in changes]


def test_changes_come_in_commit_order_decoded(client: protobase.Client) -> None:
    start = client.insert([user(0)], type=USER).position
    with client.watch(USER, start=start, old_records=True, decode="dict", timeout=DEADLINE) as w:
        first = client.insert([user(1), user(2)], type=USER).position
        client.insert([{"user_id": 1, "number": 1}], type=ORDER)  # another type: not watched
        client.update([user(1, age=10)], type=USER)
        client.remove([{"id": 2}], type=USER)
        client.upsert([user(3), user(1, age=11)], type=USER)
        got = take(w, 6)
    assert summary(got) == [
        ("insert", USER, {"id": 1}, user(1), None),
        ("insert", USER, {"id": 2}, user(2), None),
        ("update", USER, {"id": 1}, user(1, age=10), user(1)),
        ("remove", USER, {"id": 2}, None, user(2)),
        ("insert", USER, {"id": 3}, user(3), None),
        ("update", USER, {"id": 1}, user(1, age=11), user(1, age=10)),
    ]
    positions = [c.position for c in got]
    assert positions[:2] == [Position(first, 0), Position(first, 1)]
    assert positions == sorted(positions) and len(set(positions)) == 6
    assert positions[4].commit == positions[5].commit  # one upsert batch, one commit
    assert w.position is not None and w.position >= positions[-1]


def test_records_undecoded_and_without_old_records(client: protobase.Client) -> None:
    start = client.insert([user(1)], type=USER).position
    with client.watch(USER, start=start, decode="any", timeout=DEADLINE) as w:
        client.update([user(1, age=5)], type=USER)
        (c,) = take(w, 1)
    assert c.op == "update"
    assert c.key.type_url.endswith("/" + USER) and c.record.type_url.endswith("/" + USER)
    assert c.old_record is None  # not asked for
    assert client.schema().to_dict(c.record) == user(1, age=5)


def test_resume_after_the_position_gets_every_later_change_once(client: protobase.Client) -> None:
    start = client.insert([user(0)], type=USER).position
    client.insert([user(i) for i in range(1, 6)], type=USER)
    client.insert([user(i) for i in range(6, 11)], type=USER)
    with client.watch(USER, start=start, decode="dict", timeout=DEADLINE) as w:
        seen = take(w, 3)
        resume = w.position
    assert resume == seen[-1].position
    for start2 in (resume, (resume.commit, resume.index), str(resume)):
        with client.watch(USER, start=start2, decode="dict", timeout=DEADLINE) as w2:
            rest = take(w2, 7)
        assert [c.key["id"] for c in seen + rest] == list(range(1, 11))
    # A commit alone (a write acknowledgement's position) skips all of it.
    with client.watch(USER, start=resume.commit, decode="dict", timeout=DEADLINE) as w3:
        assert [c.key["id"] for c in take(w3, 5)] == list(range(6, 11))


def test_oldest_starts_at_the_first_change_kept(client: protobase.Client) -> None:
    client.insert([user(1)], type=USER)
    with client.watch(USER, start="oldest", decode="dict", timeout=DEADLINE) as w:
        assert next(w).key == {"id": 1}


def test_now_skips_what_was_committed_before(client: protobase.Client) -> None:
    client.insert([user(1)], type=USER)
    with client.watch(USER, decode="dict", timeout=DEADLINE) as w:
        # The watch may begin after this write or before it: write until
        # one arrives, then check that nothing from before the watch came.
        stop = threading.Event()

        def writer() -> None:
            i = 2
            while not stop.is_set():
                client.insert([user(i)], type=USER)
                i += 1

        t = threading.Thread(target=writer)
        t.start()
        try:
            c = next(w)
        finally:
            stop.set()
            t.join()
    assert c.key["id"] >= 2


def test_filters_as_text_and_expression_and_many_types(client: protobase.Client) -> None:
    start = client.insert([user(0)], type=USER).position
    client.insert([user(i, age=i * 10) for i in range(1, 6)], type=USER)
    client.insert([{"user_id": 7, "number": 1}], type=ORDER)
    client.insert([user(9, age=99)], type=USER)
    for where in ("age >= 30", ge("age", 30)):
        with client.watch(USER, where, start=start, decode="dict", timeout=DEADLINE) as w:
            assert [c.key["id"] for c in take(w, 4)] == [3, 4, 5, 9]
    with client.watch([USER, ORDER], start=start, decode="dict", timeout=DEADLINE) as w:
        got = take(w, 7)
    assert [c.type for c in got] == [USER] * 5 + [ORDER, USER]
    assert got[5].key == {"user_id": 7, "number": 1}


def test_close_ends_an_iteration_waiting_in_another_thread(client: protobase.Client) -> None:
    w = client.watch(USER, timeout=DEADLINE)
    ended = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in w:
                pass
        except BaseException as e:
            errors.append(e)
        ended.set()

    t = threading.Thread(target=reader)
    t.start()
    w.close()
    t.join(DEADLINE)
    assert ended.is_set() and not errors


def test_leaving_the_loop_closes_the_watch(client: protobase.Client) -> None:
    start = client.insert([user(0)], type=USER).position
    client.insert([user(1), user(2)], type=USER)
    w = client.watch(USER, start=start, timeout=DEADLINE)
    for _ in w:
        break
    with pytest.raises(StopIteration):
        next(w)


def test_server_refusals_raise_query_error(client: protobase.Client) -> None:
    with pytest.raises(QueryError) as e:
        next(client.watch("pytest.shop.Nope", timeout=DEADLINE))
    assert e.value.code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION)
    with pytest.raises(QueryError) as e:
        next(client.watch(USER, "age >=", timeout=DEADLINE))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(QueryError) as e:
        next(client.watch(USER, "nope = 1", timeout=DEADLINE))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_a_start_past_the_last_commit_is_out_of_range(client: protobase.Client) -> None:
    last = client.insert([user(1)], type=USER).position
    with pytest.raises(WatchOutOfRange) as e:
        next(client.watch(USER, start=last + 1000, timeout=DEADLINE))
    assert e.value.code == grpc.StatusCode.OUT_OF_RANGE
    # The detail is where the log starts (every commit after it is kept);
    # the message names the range, up to the last commit.
    assert e.value.oldest is not None and e.value.oldest.commit < last
    assert isinstance(e.value, QueryError) and f"newest commit {last}" in e.value.message


def test_a_start_the_log_no_longer_holds_names_the_oldest(binary: Path, tmp_path: Path) -> None:
    srv = start_server(binary, tmp_path / "data", "--watch-retention-bytes", "1")
    try:
        with protobase.Client(srv.addr) as c:
            c.apply_schema([SCHEMA_DIR])
            first = c.insert([user(0)], type=USER).position
            for i in range(1, 4):
                last = c.insert([user(i)], type=USER).position
            # The log is trimmed in the background (once a second): wait
            # until a start before the first write is refused.
            deadline = time.monotonic() + DEADLINE
            while True:
                try:
                    with c.watch(USER, start=first - 1, timeout=DEADLINE) as w:
                        next(w)
                except WatchOutOfRange as e:
                    oldest = e.oldest
                    break
                assert time.monotonic() < deadline, "the change log was never trimmed"
                time.sleep(0.1)  # polls the trimmer's progress
            assert oldest is not None and first <= oldest.commit <= last
            if oldest.commit < last:  # what is kept is served from there
                with c.watch(USER, start=oldest, decode="dict", timeout=DEADLINE) as w:
                    assert next(w).position.commit == oldest.commit + 1
    finally:
        srv.stop()


SESSIONS = """syntax = "proto3";
package pytest.tt;
import "protobase/v1/options.proto";
import "google/protobuf/timestamp.proto";
message Session {
  option (protobase.v1.record) = { primary_key: "id" ttl: { field: "expires_at" } };
  int64 id = 1;
  google.protobuf.Timestamp expires_at = 2;
}
"""


def test_reaped_records_are_removes_marked_expired(client: protobase.Client) -> None:
    client.apply_schema({"tt.proto": SESSIONS}, add=True)
    soon = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 1)) + "Z"
    session = "pytest.tt.Session"
    start = client.insert([{"id": 1, "expires_at": soon}, {"id": 2}], type=session).position
    with client.watch(session, start=start, decode="dict", timeout=DEADLINE) as w:
        client.remove([{"id": 2}], type=session)
        removed, reaped = take(w, 2)  # the reaper runs every second by default
    assert (removed.op, removed.key, removed.expired) == ("remove", {"id": 2}, False)
    assert (reaped.op, reaped.key, reaped.expired) == ("remove", {"id": 1}, True)
