"""The writer's own encoding of write requests matches protobuf's, at every length boundary."""

from __future__ import annotations

import pytest
from google.protobuf import any_pb2

from protobase._writer import _type_prefix, record_parts
from protobase.v1 import protobase_pb2 as pb

# Lengths around each varint boundary, for the value and for the Any.
SIZES = [0, 1, 100, 126, 127, 128, 129, 16300, 16340, 16383, 16384, 16385, 2**21 - 1, 2**21 + 5]
URLS = ["type.googleapis.com/a.B", "type.googleapis.com/" + "x" * 200, "t/" + "é" * 70]


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("size", SIZES)
def test_record_parts_match_protobuf(url: str, size: int) -> None:
    value = bytes(range(256)) * (size // 256) + bytes(size % 256)
    parts, n = record_parts(_type_prefix(url), value)
    got = b"".join(parts)
    want = pb.WriteStreamRequest(records=[any_pb2.Any(type_url=url, value=value)])
    if size == 0:
        # protobuf leaves an empty value out; the writer sends it empty,
        # which decodes the same.
        assert pb.WriteStreamRequest.FromString(got) == want
    else:
        assert got == want.SerializeToString()
    assert n == len(got)


def test_a_whole_request_parses_back() -> None:
    recs = [(URLS[i % 3], bytes([i % 256]) * (i * 37)) for i in range(300)]
    body = [b"\x08\x03"]
    for url, value in recs:
        body += record_parts(_type_prefix(url), value)[0]
    body.append(b"\x18\x01")
    req = pb.WriteStreamRequest.FromString(b"".join(body))
    assert req.op == pb.WRITE_OP_UPSERT and req.ack
    assert [(a.type_url, a.value) for a in req.records] == recs
