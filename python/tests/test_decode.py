"""Reads decode by default: registered generated classes, else dicts."""

from __future__ import annotations

from typing import Any

import pytest

import protobase
from protobase import eq, select

USER = "pytest.shop.User"
ORDER = "pytest.shop.Order"
NOTES = """
syntax = "proto3";
package pytest.notes;
import "protobase/v1/options.proto";
message Note {
  option (protobase.v1.record) = {primary_key: "id"};
  int64 id = 1;
  string text = 2;
}
"""


@pytest.fixture
def db(client: protobase.Client) -> protobase.Client:
    client.insert([{"id": i, "name": f"u{i}", "age": i} for i in range(1, 6)], type=USER)
    client.insert([{"user_id": 1, "number": 2, "total": 3.5}], type=ORDER)
    return client


def test_reads_return_dicts_without_registered_classes(db: protobase.Client) -> None:
    assert db.get(USER, [1]).records == [{"id": 1, "name": "u1", "age": 1}]
    (r,) = db.search([select(USER, eq("id", 2))])
    assert r.records == [{"id": 2, "name": "u2", "age": 2}]
    assert [u["id"] for u in db.scan(USER, "age >= 3")] == [3, 4, 5]
    assert [u["id"] for p in db.pages(USER, page_size=2) for u in p.records] == [1, 2, 3, 4, 5]
    assert db.query(ORDER).records == [{"user_id": 1, "number": 2, "total": 3.5}]
    (v,) = db.get_versioned(USER, [4])
    assert v.record == {"id": 4, "name": "u4", "age": 4} and v.version > 0
    with db.watch(USER, start="oldest") as w:
        c = next(iter(w))
    assert (c.key, c.record) == ({"id": 1}, {"id": 1, "name": "u1", "age": 1})
    assert db.transact(lambda tx: tx.get(USER, 3)) == {"id": 3, "name": "u3", "age": 3}


def test_registered_classes_are_returned(db: protobase.Client, shop_pb2: Any) -> None:
    db.register(shop_pb2.User)
    (u,) = db.get(USER, [1]).records
    assert isinstance(u, shop_pb2.User) and (u.id, u.name) == (1, "u1")
    assert db.query(ORDER).records == [{"user_id": 1, "number": 2, "total": 3.5}]
    db.register(shop_pb2)  # a whole generated module
    (o,) = db.query(ORDER).records
    assert isinstance(o, shop_pb2.Order) and o.total == 3.5
    (r,) = db.search([select(USER, eq("id", 2))])
    assert isinstance(r.records[0], shop_pb2.User)
    assert all(isinstance(x, shop_pb2.User) for x in db.scan(USER))
    with db.watch(USER, start="oldest") as w:
        c = next(iter(w))
    assert isinstance(c.key, shop_pb2.User) and isinstance(c.record, shop_pb2.User)
    # The other forms stay available on request.
    assert db.get(USER, [1], decode="dict").records == [{"id": 1, "name": "u1", "age": 1}]
    (raw,) = db.get(USER, [1], decode="any").records
    assert raw.type_url.endswith("/" + USER)
    (m,) = db.get(USER, [1], decode="message").records
    assert not isinstance(m, shop_pb2.User) and m.name == "u1"
    with pytest.raises(TypeError):
        db.register("shop.User")  # type: ignore[arg-type]


def test_a_type_applied_elsewhere_decodes(db: protobase.Client) -> None:
    db.schema()  # cached before the new type exists
    with protobase.Client(db.addr) as other:
        shop: dict[str, str] = dict(other.get_schema().files)
        files: dict[str, str] = {"notes.proto": NOTES, **shop}
        other.apply_schema(files)
        other.insert([{"id": 1, "text": "hi"}], type="pytest.notes.Note")
    assert db.get("pytest.notes.Note", [1]).records == [{"id": 1, "text": "hi"}]
