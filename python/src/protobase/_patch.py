"""Patches computed in the client, as the server computes them at commit.

A transaction reads its own patches: the record it returns for a patched
key is the stored one with the patch applied here, by these rules (those
of WRITE_OP_PATCH): each path of ``fields`` takes the patch record's value,
cleared when it holds none; each path of ``add`` has the patch record's
value added to the stored one (absent counts as 0; an integer sum out of
its field's range is refused); everything else stored stays, unknown
fields included. A message on a patched path is created when the patch
record holds it, patched in place when only the stored record does, and
left absent when neither does. What a transaction sends is the patch
itself: this is only what it reads back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message

from protobase._schema import Schema
from protobase.errors import write_error

FD = _descriptor.FieldDescriptor

#: The range of each integer field type, by FieldDescriptor.type.
INT_RANGES: dict[int, tuple[int, int]] = {}
for _t in (FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32):
    INT_RANGES[_t] = (-(1 << 31), (1 << 31) - 1)
for _t in (FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64):
    INT_RANGES[_t] = (-(1 << 63), (1 << 63) - 1)
for _t in (FD.TYPE_UINT32, FD.TYPE_FIXED32):
    INT_RANGES[_t] = (0, (1 << 32) - 1)
for _t in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
    INT_RANGES[_t] = (0, (1 << 64) - 1)
_FLOATS = (FD.TYPE_FLOAT, FD.TYPE_DOUBLE)


def has(m: _message.Message, fd: Any) -> bool:
    """Report whether m holds the field fd (a non-default value where there is no presence)."""
    if fd.is_repeated:
        return len(getattr(m, fd.name)) > 0
    if fd.has_presence:
        return m.HasField(fd.name)
    return bool(getattr(m, fd.name) != fd.default_value)


def field_path(md: Any, path: str) -> list[Any]:
    """Resolve a dotted field path through singular message fields (ValueError if it is none)."""
    out: list[Any] = []
    parts = path.split(".")
    for i, part in enumerate(parts):
        fd = md.fields_by_name.get(part)
        if fd is None:
            raise ValueError(f"no field {part!r} in {md.full_name}")
        out.append(fd)
        if i == len(parts) - 1:
            break
        if fd.message_type is None or fd.is_repeated:
            raise ValueError(f"field {part!r} of {md.full_name} is not a singular message")
        md = fd.message_type
    return out


def apply_patch(
    schema: Schema,
    base: any_pb2.Any | None,
    patch: any_pb2.Any,
    fields: Iterable[str],
    add: Iterable[str],
) -> any_pb2.Any | None:
    """Return what patching ``base`` with ``patch`` leaves; None stays None (no record)."""
    if base is None:
        return None
    bm = schema.decode(base)
    pm = schema.decode(patch)
    for p in fields:
        _set_path(bm, pm, _path(bm, p, patch))
    for p in add:
        fds = _path(bm, p, patch)
        try:
            _add_path(bm, pm, fds)
        except ValueError as e:
            code = grpc.StatusCode.OUT_OF_RANGE
            if fds[-1].type not in INT_RANGES and fds[-1].type not in _FLOATS:
                code = grpc.StatusCode.INVALID_ARGUMENT
            raise write_error(
                code, f"patch add {p!r}: {e}", type_url=patch.type_url, field=p, reason=str(e)
            ) from None
    return any_pb2.Any(type_url=base.type_url, value=bm.SerializeToString())


def _path(m: _message.Message, p: str, patch: any_pb2.Any) -> list[Any]:
    try:
        return field_path(m.DESCRIPTOR, p)
    except ValueError as e:
        raise write_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"patch field {p!r}: {e}",
            type_url=patch.type_url,
            field=p,
            reason=str(e),
        ) from None


def _levels(
    dst: _message.Message, src: _message.Message | None, fds: list[Any]
) -> tuple[_message.Message, _message.Message | None] | None:
    """Walk dst and src down to the message holding the path's last field.

    A message the patch record (src) holds is created in dst where missing;
    one only dst holds is patched in place, src reading as empty below it;
    where neither holds it, None: the patch leaves the path as it is.
    """
    for fd in fds[:-1]:
        if src is not None and src.HasField(fd.name):
            src = getattr(src, fd.name)
        elif dst.HasField(fd.name):
            src = None
        else:
            return None
        dst = getattr(dst, fd.name)
        dst.SetInParent()
    return dst, src


def _set_path(dst: _message.Message, src: _message.Message, fds: list[Any]) -> None:
    leaf = fds[-1]
    levels = _levels(dst, src, fds)
    if levels is None:
        return
    d, s = levels
    if s is None or not has(s, leaf):
        d.ClearField(leaf.name)
        return
    if leaf.is_repeated:
        d.ClearField(leaf.name)
        getattr(d, leaf.name).MergeFrom(getattr(s, leaf.name))
    elif leaf.message_type is not None:
        getattr(d, leaf.name).CopyFrom(getattr(s, leaf.name))
    else:
        setattr(d, leaf.name, getattr(s, leaf.name))


def _add_path(dst: _message.Message, src: _message.Message, fds: list[Any]) -> None:
    leaf = fds[-1]
    if leaf.is_repeated or leaf.message_type is not None:
        raise ValueError(f"field {leaf.name} is not a numeric scalar")
    levels = _levels(dst, src, fds)
    if levels is None:
        return
    d, s = levels
    held = s is not None and has(s, leaf)
    if not held and not has(d, leaf):
        return
    delta = getattr(s, leaf.name) if held else 0
    cur = getattr(d, leaf.name)
    if leaf.type in _FLOATS:
        setattr(d, leaf.name, cur + delta)
        return
    bounds = INT_RANGES.get(leaf.type)
    if bounds is None:
        raise ValueError(f"field {leaf.name} is not numeric")
    total = cur + delta
    if not bounds[0] <= total <= bounds[1]:
        raise ValueError(f"{cur} + {delta} is out of the range of field {leaf.name}")
    setattr(d, leaf.name, total)
