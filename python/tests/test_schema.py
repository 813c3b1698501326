"""Schema calls: apply from files or sources, plans, dry runs, drops and errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import SCHEMA_DIR, Server

import protobase
from protobase import ProtobaseError
from protobase.v1 import protobase_pb2 as pb

NOTES = """syntax = "proto3";
package pytest.notes;
import "protobase/v1/options.proto";
message Note {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  string text = 2;
}
"""


def test_apply_sources_and_get_schema(server: Server) -> None:
    with protobase.Client(server.addr) as c:
        plan = c.apply_schema({"notes.proto": NOTES}, dry_run=True)
        assert not plan.applied
        assert list(plan.plan.types_added) == ["pytest.notes.Note"]
        assert c.get_schema().files == {}

        resp = c.apply_schema({"notes.proto": NOTES})
        assert resp.applied and resp.version > 0
        got = c.get_schema()
        assert dict(got.files) == {"notes.proto": NOTES}
        assert [t.name for t in got.types] == ["pytest.notes.Note"]
        assert list(got.types[0].primary_key) == ["id"]
        assert got.write_limits.max_batch_records > 0

        again = c.apply_schema({"notes.proto": NOTES})
        assert not again.applied and again.version == resp.version


def test_apply_paths_reads_import_paths(server: Server, tmp_path: Path) -> None:
    d = tmp_path / "schema" / "pytest"
    d.mkdir(parents=True)
    (d / "notes.proto").write_text(NOTES)
    with protobase.Client(server.addr) as c:
        c.apply_schema([tmp_path / "schema"])
        assert list(c.get_schema().files) == ["pytest/notes.proto"]
        c.apply_schema([d / "notes.proto"], root=str(tmp_path / "schema"))
        assert list(c.get_schema().files) == ["pytest/notes.proto"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"no \.proto files"):
        protobase.read_proto_files([empty])
    with pytest.raises(ValueError, match="not under the root"):
        protobase.read_proto_files([d / "notes.proto"], root=str(empty))


def test_compile_error_names_file_line_and_column(server: Server) -> None:
    bad = NOTES.replace("string text = 2;", "strin text = 2;")
    with protobase.Client(server.addr) as c, pytest.raises(ProtobaseError) as ei:
        c.apply_schema({"notes.proto": bad})
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "notes.proto:7:" in ei.value.message


def test_record_type_without_primary_key_is_refused(server: Server) -> None:
    bad = NOTES.replace(
        'option (protobase.v1.record) = { primary_key: "id" };',
        "option (protobase.v1.record) = {};",
    )
    with protobase.Client(server.addr) as c, pytest.raises(ProtobaseError) as ei:
        c.apply_schema({"notes.proto": bad})
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "primary" in ei.value.message


def test_drop_needs_allow_drop(client: protobase.Client) -> None:
    client.insert([{"id": 1}], type="pytest.shop.User")
    with pytest.raises(ProtobaseError) as ei:
        client.apply_schema({"notes.proto": NOTES})
    assert ei.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "pytest.shop.User" in ei.value.message

    resp = client.apply_schema(
        {"notes.proto": NOTES}, allow_drop=["pytest.shop.User", "pytest.shop.Order"]
    )
    dropped = {d.type: d.records for d in resp.plan.types_dropped}
    assert dropped == {"pytest.shop.User": 1, "pytest.shop.Order": 0}


def test_field_type_change_with_data_is_refused(client: protobase.Client) -> None:
    client.insert([{"id": 1, "age": 3}], type="pytest.shop.User")
    src = (SCHEMA_DIR / "shop.proto").read_text().replace("int32 age = 4;", "string age = 4;")
    with pytest.raises(ProtobaseError) as ei:
        client.apply_schema({"shop.proto": src})
    assert ei.value.code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION)
    assert "age" in ei.value.message


def test_schema_classes_follow_applies(client: protobase.Client) -> None:
    s = client.schema()
    assert set(s.types) == {"pytest.shop.User", "pytest.shop.Order"}
    assert client.schema() is s  # cached
    shop = (SCHEMA_DIR / "shop.proto").read_text()
    client.apply_schema({"notes.proto": NOTES, "shop.proto": shop})
    s2 = client.schema()
    assert s2 is not s and "pytest.notes.Note" in s2.types
    note = s2.new("pytest.notes.Note", id=1, text="hi")
    client.insert([note])
    assert list(client.scan("pytest.notes.Note")) == [{"id": 1, "text": "hi"}]
    with pytest.raises(KeyError, match="no message"):
        s2.message_class("pytest.notes.Nope")


def test_protoc_generated_schema_uses_the_packaged_options(shop_pb2: Any) -> None:
    from protobase.v1 import options_pb2

    opts = shop_pb2.User.DESCRIPTOR.GetOptions().Extensions[options_pb2.record]
    assert list(opts.primary_key) == ["id"]
    assert [list(ix.fields) for ix in opts.index] == [["name"], ["email"]]
    assert opts.index[1].unique


def test_add_keeps_the_other_files_and_remove_drops_by_name(client: protobase.Client) -> None:
    before = dict(client.get_schema().files)
    resp = client.apply_schema({"notes.proto": NOTES}, add=True)
    assert resp.applied
    assert list(resp.plan.types_added) == ["pytest.notes.Note"]
    assert not resp.plan.types_dropped and not resp.plan.indexes_dropped
    files = dict(client.get_schema().files)
    assert files == {**before, "notes.proto": NOTES}
    client.insert([{"id": 1, "text": "a"}], type="pytest.notes.Note")

    with pytest.raises(ProtobaseError) as ei:
        client.apply_schema(add=True, remove=["notes.proto"])
    assert ei.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "type pytest.notes.Note: would be dropped with its 1 records" in ei.value.message

    resp = client.apply_schema(add=True, remove=["notes.proto"], allow_drop=["pytest.notes.Note"])
    assert [(d.type, d.records) for d in resp.plan.types_dropped] == [("pytest.notes.Note", 1)]
    assert list(resp.plan.files_removed) == ["notes.proto"]
    assert dict(client.get_schema().files) == before

    with pytest.raises(ProtobaseError) as ei:
        client.apply_schema(add=True, remove=["notes.proto"])
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "file notes.proto is not in the schema" in ei.value.message


def test_index_drop_needs_naming(client: protobase.Client) -> None:
    src = (SCHEMA_DIR / "shop.proto").read_text()
    no_email = src.replace('    index: { fields: "email" unique: true }\n', "")
    assert no_email != src
    for kwargs in ({}, {"dry_run": True}, {"add": True}, {"allow_drop": ["pytest.shop.User"]}):
        with pytest.raises(ProtobaseError) as ei:
            client.apply_schema({"shop.proto": no_email}, **kwargs)
        assert ei.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert "index pytest.shop.User.email: would be dropped" in ei.value.message
    resp = client.apply_schema(
        {"shop.proto": no_email}, add=True, allow_drop=["pytest.shop.User.email"]
    )
    assert [(ix.type, ix.index, ix.unique) for ix in resp.plan.indexes_dropped] == [
        ("pytest.shop.User", "email", True)
    ]


PLAYERS = """syntax = "proto3";
package pytest.players;
import "protobase/v1/options.proto";
message Player {
  option (protobase.v1.record) = {
    primary_key: "id"
    aggregate: { name: "by_team" group_by: "team" sum: ["score", "minutes"] }
  };
  int64 id = 1;
  string team = 2;
  int64 score = 3;
  double minutes = 4;
}
"""


def test_aggregate_index_answers_aggregation(server: Server) -> None:
    with protobase.Client(server.addr) as c:
        c.apply_schema({"players.proto": PLAYERS})
        ix = c.get_schema().types[0].indexes[0]
        assert ix.name == "by_team" and ix.aggregate and list(ix.sum) == ["score", "minutes"]
        assert ix.state == pb.INDEX_STATE_READY
        c.insert(
            [
                {"id": i, "team": "red" if i % 4 else "blue", "score": i, "minutes": i / 2}
                for i in range(16)
            ],
            type="pytest.players.Player",
        )
        c.remove([{"id": 15}], type="pytest.players.Player")
        a = c.aggregate(
            "pytest.players.Player",
            group_by=["team"],
            functions="count(),sum(score),avg(minutes)",
            explain=True,
        )
        assert a.rows == [
            {"team": "blue", "count()": 4, "sum(score)": 24, "avg(minutes)": 3.0},
            {"team": "red", "count()": 11, "sum(score)": 81, "avg(minutes)": 81 / 22},
        ]
        assert a.plan is not None and a.plan.text.startswith("aggregate index by_team")
        with pytest.raises(ProtobaseError, match='sum field "team" is a string'):
            c.apply_schema(
                {"players.proto": PLAYERS.replace('sum: ["score", "minutes"]', 'sum: "team"')}
            )
