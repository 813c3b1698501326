"""Writes: every operation, batching, flush, linger and stop-on-failure details."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

import protobase
from protobase import WriteError, eq, select

USER = "pytest.shop.User"


def users(ids: range, **extra: Any) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"user{i}", "email": f"u{i}@example.com", **extra} for i in ids]


def all_users(c: protobase.Client) -> list[dict[str, Any]]:
    return list(c.scan(USER, decode="dict"))


def test_insert_update_upsert_remove(client: protobase.Client) -> None:
    r = client.insert(users(range(1, 11)), type=USER)
    assert (r.records, r.batches) == (10, 1)
    assert [u["id"] for u in all_users(client)] == list(range(1, 11))

    client.update([{"id": 3, "name": "three", "age": 33}], type=USER)
    client.upsert(users(range(10, 13), age=7), type=USER)
    client.remove([{"id": 1}, {"id": 2}], type=USER)

    got = {u["id"]: u for u in all_users(client)}
    assert sorted(got) == list(range(3, 13))
    assert got[3] == {"id": 3, "name": "three", "age": 33}  # update replaces the whole record
    assert got[12]["age"] == 7


def test_writer_batches_by_records_and_flush(client: protobase.Client) -> None:
    with client.writer("insert", max_records=100) as w:
        w.write_many(users(range(250)), type=USER)
        w.flush()
        assert w.durable == 250
    res = w.close()
    assert (res.batches, res.records) == (3, 250)
    assert res.position > 0


def test_writer_batches_by_bytes(client: protobase.Client) -> None:
    schema = client.schema()
    with client.writer("insert", max_records=1000, max_bytes=2000) as w:
        for u in users(range(100)):
            w.write(schema.from_dict(USER, u))
    res = w.close()
    assert res.records == 100
    assert res.batches > 1  # each record is ~30 bytes: 2000 bytes hold fewer than 100


def test_writer_linger_sends_a_partial_batch(client: protobase.Client) -> None:
    with client.writer("insert", max_records=1000, linger=0.05) as w:
        w.write({"id": 1, "name": "a"}, type=USER)
        # Nothing but the linger timer sends this batch of one.
        assert w.wait_durable(1, timeout=60)
        assert [u["id"] for u in all_users(client)] == [1]
        w.write({"id": 2, "name": "b"}, type=USER)
    assert w.close().records == 2


def test_without_linger_a_partial_batch_waits(client: protobase.Client) -> None:
    with client.writer("insert", max_records=1000) as w:
        w.write({"id": 1, "name": "a"}, type=USER)
        assert not w.wait_durable(1, timeout=0.2)
        assert all_users(client) == []
    assert w.close().records == 1


def test_writer_is_safe_for_threads(client: protobase.Client) -> None:
    import threading

    with client.writer("insert", max_records=64) as w:

        def work(t: int) -> None:
            for i in range(500):
                w.write({"id": t * 1000 + i}, type=USER)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert w.close().records == 2000
    assert len(all_users(client)) == 2000


def test_threads_flushing_one_writer_share_batches(binary: Any, tmp_path: Any) -> None:
    """A flush waiting for its acknowledgement leaves the writer to other threads.

    With the server stopped (SIGSTOP), two threads' flushes send batches
    2 and 3 and wait; three more threads still write, and their flushes
    leave the records pending; once the server runs again, the first to
    see a place free sends the three records as batch 4, and close's
    flush (nothing pending, everything acknowledged) sends nothing.
    Sending a batch per flush would make 6 batches; holding the writer
    through a flush's wait would leave the writes of the later threads
    blocked until the server ran again.
    """
    import signal
    import threading
    import time

    from conftest import SCHEMA_DIR, start_server

    s = start_server(binary, tmp_path / "data")
    stopped = False
    try:
        with protobase.Client(s.addr) as c:
            c.apply_schema([SCHEMA_DIR])
            w = c.writer("insert")
            w.write({"id": 1}, type=USER)
            w.flush()  # batch 1: the stream is open on the server
            s.proc.send_signal(signal.SIGSTOP)
            stopped = True
            written: list[int] = []
            errors: list[BaseException] = []

            def work(i: int) -> None:
                try:
                    w.write({"id": i}, type=USER)
                    written.append(i)
                    w.flush()
                except BaseException as e:
                    errors.append(e)

            threads = [threading.Thread(target=work, args=(i,)) for i in range(2, 7)]
            for th in threads:
                th.start()
                time.sleep(0.3)  # a slow thread can only make more batches
            assert sorted(written) == [2, 3, 4, 5, 6], "a write waited for another thread's flush"
            s.proc.send_signal(signal.SIGCONT)
            stopped = False
            for th in threads:
                th.join(timeout=30)
            assert not errors, errors
            r = w.close()
            assert (r.batches, r.records) == (4, 6), r
            assert sorted(u["id"] for u in all_users(c)) == list(range(1, 7))
    finally:
        if stopped:
            s.proc.send_signal(signal.SIGCONT)
        s.stop()


def test_write_forms_generated_dynamic_any_bytes(client: protobase.Client, shop_pb2: Any) -> None:
    from google.protobuf import any_pb2

    gen = shop_pb2.User(id=1, name="generated", status=shop_pb2.ACTIVE)
    dyn = client.schema().new(USER, id=2, name="dynamic")
    packed = any_pb2.Any()
    packed.Pack(shop_pb2.User(id=3, name="any"))
    raw = shop_pb2.User(id=4, name="bytes").SerializeToString()
    with client.writer("insert") as w:
        w.write(gen)
        w.write(dyn)
        w.write(packed)
        w.write(raw, type=USER)
        w.write({"id": 5, "name": "dict", "tags": ["x", "y"], "status": "BANNED"}, type=USER)
    got = list(client.scan(USER, decode=shop_pb2.User))
    assert [u.name for u in got] == ["generated", "dynamic", "any", "bytes", "dict"]
    assert got[0].status == shop_pb2.ACTIVE
    assert list(got[4].tags) == ["x", "y"]


def test_insert_duplicate_stops_with_details(client: protobase.Client) -> None:
    client.insert(users(range(5, 6)), type=USER)
    with pytest.raises(WriteError) as ei, client.writer("insert", max_records=10) as w:
        w.write_many(users(range(0, 10)), type=USER)  # batch 0: applied
        w.write_many(users(range(100, 103)), type=USER)
        w.write_many(users(range(3, 8)), type=USER)  # batch 1: fails at record 5 (id 5)
    e = ei.value
    assert e.code == grpc.StatusCode.ALREADY_EXISTS
    assert (e.batch, e.record) == (0, 5)
    assert e.type == USER
    assert e.type_url == "type.googleapis.com/" + USER
    assert e.batches_applied == 0 and e.records_applied == 0
    assert e.reason
    assert [u["id"] for u in all_users(client)] == [5]  # nothing of the failing batch


def test_failure_after_applied_batches_counts_them(client: protobase.Client) -> None:
    with pytest.raises(WriteError) as ei, client.writer("insert", max_records=10) as w:
        w.write_many(users(range(0, 20)), type=USER)  # batches 0 and 1
        w.write_many(users(range(20, 25)), type=USER)
        w.write({"id": 21, "name": "dup"}, type=USER)  # duplicate within batch 2
        w.write_many(users(range(30, 34)), type=USER)
    e = ei.value
    assert e.code == grpc.StatusCode.ALREADY_EXISTS
    assert (e.batch, e.record) == (2, 5)
    assert (e.batches_applied, e.records_applied) == (2, 20)
    assert len(all_users(client)) == 20
    # The writer stays failed: every later call raises the same error.
    with pytest.raises(WriteError) as again:
        w.write({"id": 99}, type=USER)
    assert again.value is e


def test_invalid_field_names_the_field(client: protobase.Client) -> None:
    bad = b"\x12\x02\xff\xfe"  # field 2 (name, a string) holding invalid UTF-8
    with pytest.raises(WriteError) as ei, client.writer("insert") as w:
        w.write(bad, type=USER)
    e = ei.value
    assert e.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.field == "name"
    assert (e.batch, e.record) == (0, 0)


def test_unknown_type_is_refused(client: protobase.Client) -> None:
    with pytest.raises(WriteError) as ei:
        client.insert([b""], type="pytest.shop.Nope")
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert ei.value.type == "pytest.shop.Nope"


def test_update_and_remove_of_missing_keys_are_not_found(client: protobase.Client) -> None:
    for op in ("update", "remove"):
        with pytest.raises(WriteError) as ei, client.writer(op) as w:
            w.write({"id": 404, "name": "x"}, type=USER)
        assert ei.value.code == grpc.StatusCode.NOT_FOUND, op
        assert ei.value.record == 0


def test_unique_index_violation_names_the_index_field(client: protobase.Client) -> None:
    client.insert([{"id": 1, "email": "same@example.com"}], type=USER)
    with pytest.raises(WriteError) as ei:
        client.insert([{"id": 2, "email": "same@example.com"}], type=USER)
    assert ei.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert ei.value.field == "email"


def test_record_over_message_limit_is_refused_before_sending(binary: Any, tmp_path: Any) -> None:
    from conftest import SCHEMA_DIR, start_server

    s = start_server(binary, tmp_path / "data", "--max-message-bytes", "4096")
    try:
        with protobase.Client(s.addr) as c:
            c.apply_schema([SCHEMA_DIR])
            with c.writer("insert") as w:
                with pytest.raises(WriteError) as ei:
                    w.write({"id": 1, "name": "x" * 5000}, type=USER)
                assert ei.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert ei.value.type == USER
                w.write({"id": 2, "name": "fits"}, type=USER)  # the writer goes on
            assert [u["id"] for u in c.scan(USER, decode="dict")] == [2]
    finally:
        s.stop()


def test_writer_options_are_checked(client: protobase.Client) -> None:
    with pytest.raises(ValueError):
        client.writer("merge")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="over the server's limit"):
        client.writer("insert", max_records=10**6)
    with pytest.raises(TypeError, match="type="):
        client.insert([{"id": 1}])


def test_body_exception_cancels_the_stream(client: protobase.Client) -> None:
    with pytest.raises(KeyError), client.writer("insert", max_records=10) as w:
        w.write_many(users(range(5)), type=USER)
        raise KeyError("stop")
    assert all_users(client) == []  # the pending batch was never sent


def test_write_then_read_back_by_key(client: protobase.Client) -> None:
    client.insert(users(range(3)), type=USER)
    (r,) = client.search([select(USER, eq("id", 2))], decode="dict")
    assert r.records == [{"id": 2, "name": "user2", "email": "u2@example.com"}]


def test_server_gone_counts_what_was_acknowledged(binary: Any, tmp_path: Any) -> None:
    from conftest import SCHEMA_DIR, start_server

    s = start_server(binary, tmp_path / "data")
    try:
        with protobase.Client(s.addr) as c:
            c.apply_schema([SCHEMA_DIR])
            w = c.writer("insert", max_records=10)
            w.write_many(users(range(25)), type=USER)
            w.flush()
            assert w.durable == 25
            s.proc.kill()
            s.proc.wait()
            with pytest.raises(WriteError) as ei:
                w.write_many(users(range(100, 200)), type=USER)
                w.close()
            e = ei.value
            assert e.code == grpc.StatusCode.UNAVAILABLE, e
            assert (e.batch, e.record, e.field) == (None, None, None)
            assert (e.batches_applied, e.records_applied) == (3, 25)
    finally:
        s.stop()


def test_dicts_that_do_not_convert_are_refused_before_sending(client: protobase.Client) -> None:
    with client.writer("insert") as w:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"id": 1, "nope": 2}, USER),  # no such field
            ({"id": "x"}, USER),  # not an integer
            ({"id": 1}, "pytest.shop.Nope"),  # no such type
        ]
        for bad, typ in cases:
            with pytest.raises(WriteError) as ei:
                w.write(bad, type=typ)
            assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
            assert ei.value.type == typ and ei.value.reason
            assert ei.value.batch is None
        w.write({"id": 2}, type=USER)  # the writer goes on
    assert [u["id"] for u in all_users(client)] == [2]
