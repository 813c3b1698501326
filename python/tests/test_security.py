"""API keys and TLS, against servers started with --auth, --tls-cert and --tls-client-ca."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from conftest import SCHEMA_DIR, Server, start_server

import protobase
from protobase import TLS, ProtobaseError, QueryError, WriteError

USER = "pytest.shop.User"


@pytest.fixture
def auth_server(binary: Path, tmp_path: Path) -> Iterator[Server]:
    s = start_server(binary, tmp_path / "data", "--auth")
    yield s
    s.stop()


@pytest.fixture
def tls_server(binary: Path, tmp_path: Path, certs: Path) -> Iterator[Server]:
    s = start_server(
        binary,
        tmp_path / "data",
        "--auth",
        "--tls-cert",
        str(certs / "server.pem"),
        "--tls-key",
        str(certs / "server-key.pem"),
        "--tls-client-ca",
        str(certs / "ca.pem"),
    )
    yield s
    s.stop()


def test_calls_without_a_key_are_unauthenticated(auth_server: Server) -> None:
    with protobase.Client(auth_server.addr) as c, pytest.raises(ProtobaseError) as ei:
        c.get_schema()
    assert ei.value.code == grpc.StatusCode.UNAUTHENTICATED
    with protobase.Client(auth_server.addr, api_key="pb_" + "A" * 32) as c:
        with pytest.raises(ProtobaseError) as ei:
            c.get_schema()
        assert ei.value.code == grpc.StatusCode.UNAUTHENTICATED


def test_roles_and_scopes(auth_server: Server) -> None:
    admin = protobase.Client(auth_server.addr, api_key=auth_server.admin_key())
    admin.apply_schema([SCHEMA_DIR])
    admin.insert([{"id": 1, "name": "a"}], type=USER)
    reader_key = admin.create_key("reader", "read", ["pytest.shop.*"])
    order_writer_key = admin.create_key("orders", "write", ["pytest.shop.Order"])
    assert {k.name for k in admin.list_keys()} >= {"reader", "orders"}

    with protobase.Client(auth_server.addr, api_key=reader_key) as reader:
        assert reader.get(USER, [1]).missing == []
        assert [r.index for r in reader.search([protobase.select(USER, "id = 1")])] == [0]
        with pytest.raises(WriteError) as we:
            reader.insert([{"id": 2}], type=USER)
        assert we.value.code == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(ProtobaseError) as pe:
            reader.apply_schema([SCHEMA_DIR])
        assert pe.value.code == grpc.StatusCode.PERMISSION_DENIED

    with protobase.Client(auth_server.addr, api_key=order_writer_key) as w:
        w.insert([{"user_id": 1, "number": 1}], type="pytest.shop.Order")
        with pytest.raises(WriteError) as we, w.writer("insert") as wr:
            wr.write({"user_id": 1, "number": 2}, type="pytest.shop.Order")
            # Encoded by hand: this key's GetSchema does not show the type.
            wr.write(b"\x08\x03", type=USER)
        assert we.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert (we.value.batch, we.value.record, we.value.type) == (0, 1, USER)
        with pytest.raises(QueryError) as qe:
            w.query(USER)
        assert qe.value.code == grpc.StatusCode.PERMISSION_DENIED

    admin.revoke_key("reader")
    with protobase.Client(auth_server.addr, api_key=reader_key) as reader:
        with pytest.raises(QueryError) as qe:
            reader.get(USER, [1])
        assert qe.value.code == grpc.StatusCode.UNAUTHENTICATED
    admin.close()


def test_key_from_the_environment(auth_server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROTOBASE_API_KEY", auth_server.admin_key())
    with protobase.Client(auth_server.addr) as c:
        assert c.get_schema().version == 0


def test_key_is_never_sent_in_the_clear_off_loopback() -> None:
    with pytest.raises(ValueError, match="plaintext"):
        protobase.Client("db.example:7070", api_key="pb_" + "A" * 32)
    assert protobase.is_loopback("127.0.0.1:1") and protobase.is_loopback("[::1]:1")
    assert protobase.is_loopback("localhost:1") and not protobase.is_loopback("db.example:1")


def test_mutual_tls_with_a_key(tls_server: Server, certs: Path) -> None:
    key = tls_server.admin_key()
    tls = TLS(
        ca=str(certs / "ca.pem"),
        cert=str(certs / "client.pem"),
        key=(certs / "client-key.pem").read_bytes(),
    )
    with protobase.Client(tls_server.addr, api_key=key, tls=tls) as c:
        c.apply_schema([SCHEMA_DIR])
        with c.writer("insert") as w:
            w.write({"id": 1, "name": "over tls"}, type=USER)
        assert [r["name"] for r in c.scan(USER, decode="dict")] == ["over tls"]
        (r,) = c.search([protobase.select(USER, 'name = "over tls"')])
        assert r.count == 1


def test_tls_refusals(tls_server: Server, certs: Path) -> None:
    key = tls_server.admin_key()
    # Plaintext to a TLS server, a client without a certificate, and a
    # client that does not trust the server's CA all fail to connect.
    attempts = [
        protobase.Client(tls_server.addr, api_key=key),
        protobase.Client(tls_server.addr, api_key=key, tls=TLS(ca=str(certs / "ca.pem"))),
        protobase.Client(
            tls_server.addr,
            api_key=key,
            tls=TLS(
                ca=str(certs / "client.pem"),
                cert=str(certs / "client.pem"),
                key=str(certs / "client-key.pem"),
            ),
        ),
    ]
    for c in attempts:
        with c, pytest.raises(ProtobaseError) as ei:
            c.get_schema(timeout=60)
        assert ei.value.code == grpc.StatusCode.UNAVAILABLE, ei.value


def test_plaintext_to_tls_names_the_option(tls_server: Server) -> None:
    # gRPC alone says the connection failed; the client says why.
    with protobase.Client(tls_server.addr) as c, pytest.raises(ProtobaseError) as ei:
        c.get_schema(timeout=60)
    assert ei.value.code == grpc.StatusCode.UNAVAILABLE
    assert "speaks TLS" in ei.value.message and "tls=" in ei.value.message, ei.value.message
