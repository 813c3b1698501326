"""Reads: multiplexed search with expressions and text filters, scan, pages, get."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

import protobase
from protobase import QueryError, and_, eq, ge, in_, not_, or_, prefix, select

USER = "pytest.shop.User"
ORDER = "pytest.shop.Order"


@pytest.fixture
def db(client: protobase.Client) -> protobase.Client:
    """The client with 100 users (ids 0..99, ages 0..99, names user0..user99) and orders."""
    client.insert(
        [
            {
                "id": i,
                "name": f"user{i}",
                "email": f"u{i}@example.com",
                "age": i,
                "status": "ACTIVE" if i % 2 else "BANNED",
                "tags": ["even" if i % 2 == 0 else "odd"],
            }
            for i in range(100)
        ],
        type=USER,
    )
    client.insert(
        [{"user_id": u, "number": n, "total": u + n / 10} for u in range(3) for n in range(4)],
        type=ORDER,
    )
    return client


def ids(records: list[Any]) -> list[int]:
    return [r.get("id", 0) for r in records]  # a field at its default is left out


def test_search_multiplexes_queries_and_yields_each(db: protobase.Client) -> None:
    queries = [select(USER, eq("id", i)) for i in range(50)]
    queries.append(select(USER, and_(ge("age", 90), not_(eq("id", 95))), limit=3))
    queries.append(select(USER, or_(in_("id", [1, 2]), prefix("name", "user99"))))
    results = {r.index: r for r in db.search(queries, batch_size=7, decode="dict")}
    assert sorted(results) == list(range(52))
    for i in range(50):
        assert ids(results[i].records) == [i]
        assert results[i].count == 1
    assert ids(results[50].records) == [90, 91, 92]
    assert ids(results[51].records) == [1, 2, 99]


def test_search_with_text_filters(db: protobase.Client) -> None:
    queries = [
        select(USER, 'age >= 95 and name prefix "user9"'),
        select(USER, "id in (3, 4) or age = 50", order="pk", descending=True),
        select(USER, "status = BANNED and age < 6"),
        select(USER, 'tags = "odd" and id < 4', keys_only=True),
        select(USER, "age > 10", count=True),
    ]
    r = {x.index: x for x in db.search(queries, decode="dict")}
    assert ids(r[0].records) == [95, 96, 97, 98, 99]
    assert ids(r[1].records) == [50, 4, 3]
    assert ids(r[2].records) == [0, 2, 4]
    assert r[3].records == [{"id": 1}, {"id": 3}]
    assert (r[4].records, r[4].count) == ([], 89)


def test_one_bad_query_fails_alone(db: protobase.Client) -> None:
    queries = [
        select(USER, eq("id", 1)),
        select(USER, "age >= "),  # does not parse
        select(USER, eq("nope", 1)),  # no such field
        select("pytest.shop.Nope"),  # no such type
        select(USER, eq("id", 2)),
    ]
    r = {x.index: x for x in db.search(queries, decode="dict")}
    assert ids(r[0].records) == [1] and ids(r[4].records) == [2]
    codes = {1: "INVALID_ARGUMENT", 2: "INVALID_ARGUMENT", 3: "NOT_FOUND"}
    for i, code in codes.items():
        err = r[i].error
        assert not r[i].ok and err is not None
        assert err.code == grpc.StatusCode[code], err
        assert err.query == i
    assert r[1].error is not None and "column" in r[1].error.message
    assert r[2].error is not None and r[2].error.field == "nope"


def test_filter_with_where_is_refused(db: protobase.Client) -> None:
    q = select(USER, "id = 1")
    q.where.CopyFrom(eq("id", 1))
    (r,) = db.search([q])
    assert r.error is not None and r.error.code == grpc.StatusCode.INVALID_ARGUMENT


def test_open_search_sends_batches_as_they_come(db: protobase.Client) -> None:
    s = db.open_search(decode="dict")
    first = s.send([select(USER, eq("id", 7))])
    second = s.send([select(USER, eq("id", 8)), select(USER, eq("id", 9))])
    assert (list(first), list(second)) == ([0], [1, 2])
    s.close()
    got = {r.index: ids(r.records) for r in s.results()}
    assert got == {0: [7], 1: [8], 2: [9]}


def test_explain_returns_the_plan(db: protobase.Client) -> None:
    (r,) = db.search([select(USER, 'name = "user5"', explain=True)])
    assert r.plan is not None and r.plan.access == "index_range"


def test_scan_with_parallelism(db: protobase.Client) -> None:
    sc = db.scan(USER, "age >= 10", parallelism=4, batch_size=7, decode="dict")
    got = list(sc)
    assert sorted(ids(got)) == list(range(10, 100))
    assert sc.count == 90


def test_scan_decodes_into_generated_classes(db: protobase.Client, shop_pb2: Any) -> None:
    got = list(db.scan(select(USER, eq("id", 3)), decode=shop_pb2.User))
    assert [(u.id, u.name, u.status) for u in got] == [(3, "user3", shop_pb2.ACTIVE)]


def test_scan_error_is_a_query_error(db: protobase.Client) -> None:
    with pytest.raises(QueryError) as ei:
        list(db.scan(USER, "age >>= 3"))
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "column" in ei.value.message


def test_query_pages_with_tokens(db: protobase.Client) -> None:
    p1 = db.query(USER, "age < 25", page_size=10, decode="dict")
    assert ids(p1.records) == list(range(10)) and p1.next_page_token
    p2 = db.query(USER, "age < 25", page_size=10, page_token=p1.next_page_token, decode="dict")
    assert ids(p2.records) == list(range(10, 20))
    pages = list(db.pages(USER, "age < 25", page_size=10, decode="dict"))
    assert [len(p.records) for p in pages] == [10, 10, 5]
    assert pages[-1].next_page_token == ""
    assert [i for p in pages for i in ids(p.records)] == list(range(25))


def test_query_count_and_errors(db: protobase.Client) -> None:
    assert db.query(USER, "age >= 50", count=True).count == 50
    with pytest.raises(QueryError) as ei:
        db.query(USER, "age >= 1", page_token="not-a-token")
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(QueryError) as ei:
        db.query(USER, "agee = 1")
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "agee" in ei.value.message


def test_get_by_values_tuples_and_records(db: protobase.Client, shop_pb2: Any) -> None:
    r = db.get(USER, [5, 1000, 7, shop_pb2.User(id=9), shop_pb2.User(id=4242)], decode="dict")
    assert ids(r.records) == [5, 7, 9]
    assert r.missing == [1, 4]
    assert r.missing_keys == [1000, shop_pb2.User(id=4242)]
    o = db.get(ORDER, [(1, 2), {"user_id": 2, "number": 3}, (9, 9)], decode="dict")
    assert [(x["user_id"], x["number"]) for x in o.records] == [(1, 2), (2, 3)]
    assert o.missing == [2]
    assert o.missing_keys == [(9, 9)]


def test_get_asks_again_for_keys_left_unanswered(db: protobase.Client) -> None:
    # Three records of 25 MiB: one answer holds two at most (a Get answer
    # is bounded in bytes); the server names the third as unanswered and
    # get asks again for it, keeping the keys' order and the missing ones.
    name = "x" * (25 << 20)
    for i in (9001, 9002, 9003):
        db.upsert([{"id": i, "name": name}], type=USER)
    r = db.get(USER, [9003, 4242, 9001, 9002, 9001], decode="any")
    assert [len(a.value) > (25 << 20) for a in r.records] == [True] * 4
    assert r.missing == [1]
    assert ids(db.get(USER, [9002, 1], decode="dict").records) == [9002, 1]


def test_get_errors(db: protobase.Client) -> None:
    with pytest.raises(QueryError) as ei:
        db.get("pytest.shop.Nope", [1])
    assert ei.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(QueryError) as ei:
        db.get(USER, ["not a number"])
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(TypeError):
        db.get(USER, [None])  # type: ignore[list-item]


def test_decode_forms(db: protobase.Client) -> None:
    (raw,) = db.get(USER, [1], decode="any").records
    assert raw.type_url == "type.googleapis.com/" + USER
    (msg,) = db.get(USER, [1], decode="message").records
    assert (msg.id, msg.name) == (1, "user1")
    (d,) = db.get(USER, [1], decode="dict").records
    assert d == {
        "id": 1,
        "name": "user1",
        "email": "u1@example.com",
        "age": 1,
        "tags": ["odd"],
        "status": "ACTIVE",
    }
    with pytest.raises(ValueError):
        db.get(USER, [1], decode="json")
    assert db.get(USER, [1], decode=None).records == [raw]


def test_scan_stops_early_and_the_client_goes_on(db: protobase.Client) -> None:
    with db.scan(USER, batch_size=10) as sc:
        first = [next(sc) for _ in range(15)]
    assert len(first) == 15
    assert db.query(USER, count=True).count == 100


def test_aggregate_by_group(db: protobase.Client) -> None:
    a = db.aggregate(
        USER,
        "age < 10",
        group_by=["status"],
        functions="count(),sum(age),avg(age),min(name),max(age)",
        explain=True,
    )
    assert a.rows == [
        {
            "status": "ACTIVE",
            "count()": 5,
            "sum(age)": 25,
            "avg(age)": 5.0,
            "min(name)": "user1",
            "max(age)": 9,
        },
        {
            "status": "BANNED",
            "count()": 5,
            "sum(age)": 20,
            "avg(age)": 4.0,
            "min(name)": "user0",
            "max(age)": 8,
        },
    ]
    assert a.plan is not None and "aggregate group by status" in a.plan.text
    empty = db.aggregate(select(USER, ge("age", 1000)), functions=["count()", "sum(age)"])
    assert empty.rows == [{"count()": 0, "sum(age)": None}]
    assert protobase.parse_functions("count(),avg(x)")[1].field == "x"


def test_aggregate_errors(db: protobase.Client) -> None:
    with pytest.raises(QueryError) as ei:
        db.aggregate(USER, group_by=["tags"])
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "tags" in ei.value.message and "repeated" in ei.value.message
    with pytest.raises(QueryError) as ei:
        db.aggregate(USER, functions="sum(name)")
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(ValueError, match="median"):
        db.aggregate(USER, functions="median(age)")
