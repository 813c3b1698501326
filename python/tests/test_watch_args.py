"""Watch arguments and positions, checked in the client before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest

import protobase
from protobase import Position

USER = "pytest.shop.User"


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"types": []}, ValueError),
        ({"types": USER, "batch_size": 0}, ValueError),
        ({"types": USER, "batch_size": -1}, ValueError),
        ({"types": USER, "batch_size": 1 << 32}, ValueError),
        ({"types": USER, "batch_size": True}, ValueError),
        ({"types": USER, "start": "yesterday"}, ValueError),
        ({"types": USER, "start": "1.2.3"}, ValueError),
        ({"types": USER, "start": "-1"}, ValueError),
        ({"types": USER, "start": -1}, ValueError),
        ({"types": USER, "start": 1 << 64}, ValueError),
        ({"types": USER, "start": (1,)}, ValueError),
        ({"types": USER, "start": (1, -1)}, ValueError),
        ({"types": USER, "start": (1, 1 << 32)}, ValueError),
        ({"types": USER, "start": 1.5}, TypeError),
        ({"types": USER, "start": True}, TypeError),
        ({"types": USER, "start": ("1", 2)}, TypeError),
        ({"types": USER, "start": None}, TypeError),
    ],
)
def test_malformed_arguments_are_refused_before_sending(
    kwargs: dict[str, Any], exc: type[Exception]
) -> None:
    # A client to nowhere: nothing may be sent.
    with protobase.Client("127.0.0.1:1") as c, pytest.raises(exc):
        c.watch(**kwargs)


def test_positions_parse_print_and_order() -> None:
    assert Position.parse("12") == Position(12)
    assert Position.parse(" 12.3 ") == Position(12, 3)
    assert str(Position(12)) == "12" and str(Position(12, 0)) == "12.0"
    assert Position(12, 0) < Position(12, 7) < Position(12) < Position(13, 0)
    assert Position.from_pb(Position(5, 0).to_pb()) == Position(5, 0)
    assert not Position(5).to_pb().HasField("index")
    for bad in ("", "x", "1.", ".1", "1.2.3", "1e3", "0x10", "\uff11\uff12"):
        with pytest.raises(ValueError):
            Position.parse(bad)
