"""What a transaction knows of one record, and how it knows a record.

A transaction knows a record by its type and primary key. Records, key
values and primary-key lookups all come down to one form: a record of the
type holding only its primary-key fields. Its deterministic encoding
identifies the record (two spellings of one key are one record), and it is
what a key condition names. Building it takes the schema: the client has
no other way to tell key fields apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import any_pb2
from google.protobuf import message as _message
from google.protobuf.message import DecodeError

from protobase._keys import Key, key_record, pack
from protobase._patch import FD, INT_RANGES, apply_patch, field_path, has
from protobase._schema import TYPE_URL_PREFIX, Schema, type_name
from protobase.v1 import protobase_pb2 as pb

#: A record's identity in a transaction and the key record naming it.
Identity = tuple[bytes, any_pb2.Any]


def record_key(schema: Schema, rec: any_pb2.Any) -> Identity:
    """Return the identity of a stored, written or key record."""
    name = type_name(rec.type_url)
    rt = schema.types.get(name)
    if rt is None:
        raise ValueError(f"no record type {name!r} in schema version {schema.version}")
    try:
        m = schema.decode(rec)
    except DecodeError as e:
        raise ValueError(f"a record of {name} does not decode: {e}") from None
    km = schema.message_class(name)()
    for path in rt.primary_key:
        _copy_key_field(km, m, path.split("."))
    b = km.SerializeToString(deterministic=True)
    return name.encode() + b"\x00" + b, any_pb2.Any(type_url=TYPE_URL_PREFIX + name, value=b)


def key_identity(schema: Schema, type: str, key: Key) -> Identity:
    """Return the identity of a key as ``get`` takes it."""
    return record_key(schema, key_record(schema, type, key))


def _copy_key_field(dst: _message.Message, src: _message.Message, parts: list[str]) -> None:
    """Copy the field at the end of a path; a default value and the messages to it stay out.

    So a key spelled with an empty nested message and one without it encode
    alike, as the server keys both the same.
    """
    for p in parts[:-1]:
        if not src.HasField(p):
            return
        src = getattr(src, p)
    leaf = src.DESCRIPTOR.fields_by_name[parts[-1]]
    if not has(src, leaf):
        return
    v = getattr(src, leaf.name)
    if v == leaf.default_value:
        return
    for p in parts[:-1]:
        dst = getattr(dst, p)
    setattr(dst, leaf.name, v)


def lookup_key(schema: Schema, q: pb.Query) -> Identity | None:
    """Return the identity of the one record q reads by primary key, if q is such a lookup.

    A lookup compares each primary-key field for equality (one comparison,
    or several under one AND) and asks for nothing but the record: no text
    filter, keys_only or count. An operand that does not fit its field
    exactly makes it no lookup: the query goes to the server as it is.
    """
    if q.filter or q.keys_only or q.count or not q.HasField("where"):
        return None
    rt = schema.types.get(q.type)
    if rt is None:
        return None
    w = q.where
    kind = w.WhichOneof("expr")
    if kind == "cmp":
        cmps: list[pb.Comparison | None] = [w.cmp]
    elif kind == "and":
        cmps = [e.cmp if e.WhichOneof("expr") == "cmp" else None for e in getattr(w, "and").exprs]
    else:
        return None
    paths = list(rt.primary_key)
    if len(cmps) != len(paths):
        return None
    m = schema.message_class(q.type)()
    seen: set[str] = set()
    for c in cmps:
        if c is None or c.op != pb.OP_EQ or c.field not in paths or c.field in seen:
            return None
        seen.add(c.field)
        fds = field_path(m.DESCRIPTOR, c.field)
        v = _operand(fds[-1], c.value)
        if v is None:
            return None
        d = m
        for fd in fds[:-1]:
            d = getattr(d, fd.name)
        setattr(d, fds[-1].name, v)
    return record_key(schema, pack(m))


def _operand(fd: Any, v: pb.Value) -> Any | None:
    """Return a comparison's operand as a value of the field fd, when it is one exactly."""
    kind = v.WhichOneof("kind")
    t = fd.type
    if kind in ("int", "uint"):
        n = v.int if kind == "int" else v.uint
        lo_hi = INT_RANGES.get(t)
        return n if lo_hi is not None and lo_hi[0] <= n <= lo_hi[1] else None
    if kind == "enum":
        if t != FD.TYPE_ENUM:
            return None
        ev = fd.enum_type.values_by_name.get(v.enum)
        return None if ev is None else ev.number
    want = {"string": FD.TYPE_STRING, "bytes": FD.TYPE_BYTES, "bool": FD.TYPE_BOOL}
    if kind in want:
        return getattr(v, kind) if t == want[kind] else None
    if kind == "double":
        return v.double if t == FD.TYPE_DOUBLE else None
    return None


@dataclass
class TxRecord:
    """What a transaction knows of one record.

    ``read``: the stored record was read, ``stored`` (None: there was none)
    at ``version``. ``cond``: a key condition names it. ``wrote``: the
    transaction wrote it; when ``known``, ``value`` is what its writes
    leave (None: no record) and ``from_stored`` says it was computed from
    the stored record (a patch of what was read); otherwise ``patches``
    holds patches of a stored record not read yet.
    """

    key: any_pb2.Any
    read: bool = False
    stored: any_pb2.Any | None = None
    version: int = 0
    cond: bool = False
    wrote: bool = False
    known: bool = False
    from_stored: bool = False
    value: any_pb2.Any | None = None
    patches: list[any_pb2.Any] = field(default_factory=list)

    def clone(self) -> TxRecord:
        """Return a copy to change, this one left as it is."""
        return dataclasses.replace(self, patches=list(self.patches))

    def write(
        self,
        schema: Schema,
        op: str,
        rec: any_pb2.Any,
        fields: Sequence[str],
        add: Sequence[str],
    ) -> None:
        """Note what a write of rec leaves of the record."""
        if op != "patch":
            self.wrote, self.known, self.from_stored, self.patches = True, True, False, []
            self.value = None if op == "remove" else rec
            return
        if self.wrote and not self.known:
            self.patches.append(rec)
            return
        if not self.wrote and not self.read:
            self.wrote, self.patches = True, [rec]
            return
        if not self.wrote:
            self.value, self.from_stored = self.stored, True
        self.value = apply_patch(schema, self.value, rec, fields, add)
        self.wrote = self.known = True

    def resolve(self, schema: Schema, fields: Sequence[str], add: Sequence[str]) -> None:
        """Apply the pending patches to the stored record, now read."""
        v = self.stored
        for p in self.patches:
            v = apply_patch(schema, v, p, fields, add)
        self.known, self.from_stored, self.value, self.patches = True, True, v, []
