"""Exceptions per status code, each raised from a real server's response."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from conftest import SCHEMA_DIR, Server, free_port, start_server

import protobase
from protobase import (
    Aborted,
    AlreadyExists,
    ConflictError,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ProtobaseError,
    QueryError,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    WatchOutOfRange,
    WriteError,
    if_key,
    select,
)

USER = "pytest.shop.User"


@pytest.fixture
def auth_server(binary: Path, tmp_path: Path) -> Iterator[Server]:
    s = start_server(binary, tmp_path / "data", "--auth", "--max-batch-records", "2")
    yield s
    s.stop()


def test_writes_raise_the_class_of_their_status(client: protobase.Client) -> None:
    client.insert([{"id": 1, "name": "Ann", "email": "a@x"}], type=USER)

    with pytest.raises(AlreadyExists) as ae:
        client.insert([{"id": 1, "name": "Ann"}], type=USER)
    e = ae.value
    assert isinstance(e, WriteError) and isinstance(e, ProtobaseError)
    assert e.code == grpc.StatusCode.ALREADY_EXISTS
    assert (e.batch, e.record, e.type) == (0, 0, USER) and e.reason

    with pytest.raises(NotFound) as nf:
        client.update([{"id": 1, "name": "A"}, {"id": 2, "name": "B"}], type=USER)
    assert isinstance(nf.value, WriteError) and nf.value.record == 1 and nf.value.reason

    with pytest.raises(AlreadyExists) as ue:
        client.insert([{"id": 3, "name": "C", "email": "a@x"}], type=USER)
    assert ue.value.field == "email"

    with pytest.raises(Aborted) as ab:
        client.apply(
            [{"id": 1, "name": "Z"}],
            op="update",
            type=USER,
            conditions=[if_key(client.key_record(USER, 1), version=10**9)],
        )
    a = ab.value
    assert isinstance(a, ConflictError) and isinstance(a, WriteError)
    assert a.condition == 0 and a.version is not None and 0 < a.version < 10**9 and a.reason


def test_reads_raise_the_class_of_their_status(client: protobase.Client) -> None:
    with pytest.raises(InvalidArgument) as ia:
        list(client.scan(USER, "nope = 1"))
    assert isinstance(ia.value, QueryError) and ia.value.field and ia.value.reason

    (r,) = list(client.search([select(USER, "age >=")]))
    assert isinstance(r.error, InvalidArgument) and isinstance(r.error, QueryError)

    with pytest.raises(NotFound) as nf:
        client.get("pytest.shop.Nope", [1])
    assert isinstance(nf.value, QueryError)

    last = client.insert([{"id": 1, "name": "Ann"}], type=USER).position
    with pytest.raises(OutOfRange) as oor:
        next(client.watch(USER, start=last + 1000))
    assert isinstance(oor.value, WatchOutOfRange) and isinstance(oor.value, QueryError)
    assert oor.value.oldest is not None

    # A watch with no changes to send waits until its deadline passes. The
    # server cancels the stream at the same deadline (RST_STREAM), which
    # can reach the client first as CANCELLED: try again then.
    for _ in range(20):
        try:
            next(client.watch(USER, timeout=0.5))
        except DeadlineExceeded as e:
            assert isinstance(e, QueryError)
            break
        except ProtobaseError as e:
            assert e.code == grpc.StatusCode.CANCELLED, e
    else:
        pytest.fail("no watch ended with DEADLINE_EXCEEDED")


def test_schema_refusals(client: protobase.Client) -> None:
    with pytest.raises(FailedPrecondition) as fp:
        client.apply_schema({"empty.proto": 'syntax = "proto3";\npackage pytest.empty;\n'})
    assert "pytest.shop.User" in fp.value.message
    with pytest.raises(InvalidArgument):
        client.apply_schema({"bad.proto": "syntax = nope"})


def test_keys_and_limits(auth_server: Server) -> None:
    with protobase.Client(auth_server.addr) as anon, pytest.raises(Unauthenticated) as un:
        anon.search([select(USER)])
        list(anon.search([select(USER)]))
    assert isinstance(un.value, ProtobaseError)
    with protobase.Client(auth_server.addr) as anon, pytest.raises(Unauthenticated):
        anon.get_schema()

    with protobase.Client(auth_server.addr, api_key=auth_server.admin_key()) as admin:
        admin.apply_schema([SCHEMA_DIR])
        reader_key = admin.create_key("reader", "read", ["pytest.shop.*"])
        with pytest.raises(ResourceExhausted) as rx:
            admin.apply([{"id": i, "name": "n"} for i in range(3)], op="insert", type=USER)
        assert isinstance(rx.value, WriteError) and rx.value.reason
    with protobase.Client(auth_server.addr, api_key=reader_key) as reader:
        with pytest.raises(PermissionDenied) as pd:
            reader.apply([{"id": 1, "name": "a"}], op="insert", type=USER)
        assert isinstance(pd.value, WriteError) and pd.value.reason
        with pytest.raises(PermissionDenied):
            reader.create_key("x", "read")


def test_unavailable_and_the_public_names() -> None:
    # A port nothing listens on: one below the ephemeral range, which no
    # outgoing connection takes meanwhile.
    port = free_port()
    with protobase.Client(f"127.0.0.1:{port}") as c, pytest.raises(Unavailable) as un:
        c.get_schema(timeout=10)
    tb = "".join(traceback.format_exception(un.value))
    assert "protobase.errors.Unavailable: UNAVAILABLE" in tb and "protobase/_errors" not in tb
    for cls in (Aborted, NotFound, ConflictError, WatchOutOfRange, ProtobaseError):
        assert cls.__module__ == "protobase.errors"
    assert ConflictError.__name__ == "Aborted"
