"""Primary keys: as Get takes them (JSON values or key records), and as records.

A key is given the same way everywhere: the value of a one-field primary
key, a list or tuple of a compound key's values in primary-key order, a
dict by field path, or a record holding the key fields.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from google.protobuf import any_pb2, json_format, struct_pb2
from google.protobuf import message as _message

from protobase._query import Enum
from protobase._schema import TYPE_URL_PREFIX, Schema, type_name
from protobase.v1 import protobase_pb2 as pb

#: A primary key for ``Client.get``: a value, a list or tuple of a compound
#: key's values, a dict by field path, or a record holding the key fields.
Key = (
    bool
    | int
    | float
    | str
    | bytes
    | Enum
    | list[Any]
    | tuple[Any, ...]
    | Mapping[str, Any]
    | _message.Message
)


def pack(m: _message.Message) -> any_pb2.Any:
    """Return m as an Any, or m itself when it is one."""
    if isinstance(m, any_pb2.Any):
        return m
    return any_pb2.Any(
        type_url=TYPE_URL_PREFIX + m.DESCRIPTOR.full_name, value=m.SerializeToString()
    )


def key_value(k: Any) -> struct_pb2.Value:
    """Return a primary key (or one of its values) as a JSON value for Get.

    Integers beyond a double's exact range travel as strings, as protobuf's
    JSON mapping allows for 64-bit fields; bytes travel as base64.
    """
    v = struct_pb2.Value()
    _set_key(v, k)
    return v


def get_request(
    type: str, keys: list[Key], todo: list[int], versions: bool
) -> tuple[pb.GetRequest, list[int]]:
    """Build the request for the keys at the indexes ``todo``.

    Returns it with the index of the key at each request position: the
    server numbers JSON keys first, then key records.
    """
    req = pb.GetRequest(type=type, versions=versions)
    values: list[int] = []
    records: list[int] = []
    for i in todo:
        k = keys[i]
        if isinstance(k, _message.Message):
            req.key_records.append(pack(k))
            records.append(i)
        else:
            _set_key(req.keys.add(), k)
            values.append(i)
    return req, values + records


def take_get_response(
    type: str,
    resp: pb.GetResponse,
    order: list[int],
    todo: list[int],
    found: dict[int, tuple[any_pb2.Any, int]],
) -> list[int]:
    """Note the records a Get answered in ``found``, by key index; return the keys to ask again."""
    skip = set(resp.missing) | set(resp.unanswered)
    again = [order[u] for u in resp.unanswered if u < len(order)]
    n = 0
    for p, i in enumerate(order):
        if p not in skip and n < len(resp.records):
            v = resp.versions[n] if n < len(resp.versions) else 0
            found[i] = (resp.records[n], v)
            n += 1
    if len(again) == len(todo):
        raise ValueError(f"get {type}: the server answered none of {len(todo)} keys")
    return again


def _set_key(v: struct_pb2.Value, k: Any) -> None:
    # Filled in place: passing messages to constructors copies them.
    if isinstance(k, bool):
        v.bool_value = k
    elif isinstance(k, int):
        if abs(k) <= 1 << 53:
            v.number_value = k
        else:
            v.string_value = str(k)
    elif isinstance(k, float):
        v.number_value = k
    elif isinstance(k, str):
        v.string_value = k
    elif isinstance(k, bytes):
        v.string_value = base64.b64encode(k).decode()
    elif isinstance(k, Enum):
        v.string_value = k.name
    elif isinstance(k, (list, tuple)):
        values = v.list_value.values
        for x in k:
            _set_key(values.add(), x)
    elif isinstance(k, Mapping):
        fields = v.struct_value.fields
        for name, x in k.items():
            _set_key(fields[name], x)
    else:
        raise TypeError(f"cannot use a {k.__class__.__name__} as a primary key")


def key_record(schema: Schema, type: str, key: Key) -> any_pb2.Any:
    """Return a record of ``type`` holding only the primary key ``key``.

    This is what a condition on a key (``if_key``) names. A record given as
    the key is returned packed as it is: the server reads only its key.
    """
    if isinstance(key, _message.Message):
        a = pack(key)
        if type_name(a.type_url) != type:
            raise ValueError(f"a key of {type} given as a record of {type_name(a.type_url)}")
        return a
    rt = schema.types.get(type)
    if rt is None:
        raise KeyError(f"no record type {type!r} in schema version {schema.version}")
    pk = list(rt.primary_key)
    if isinstance(key, Mapping):
        by_path = dict(key)
    elif isinstance(key, (list, tuple)):
        if len(key) != len(pk):
            raise ValueError(
                f"the primary key of {type} has {len(pk)} fields ({', '.join(pk)}), "
                f"the key given {len(key)} values"
            )
        by_path = dict(zip(pk, key, strict=True))
    else:
        if len(pk) != 1:
            raise ValueError(
                f"the primary key of {type} has {len(pk)} fields ({', '.join(pk)}): "
                "give a list, a tuple or a dict"
            )
        by_path = {pk[0]: key}
    nested: dict[str, Any] = {}
    for path, v in by_path.items():
        d = nested
        *parents, leaf = str(path).split(".")
        for p in parents:
            d = d.setdefault(p, {})
        d[leaf] = _json(v)
    try:
        return pack(schema.from_dict(type, nested))
    except json_format.ParseError as e:
        raise ValueError(f"key of {type}: {e}") from None


def _json(v: Any) -> Any:
    """Return a key value in protobuf's JSON mapping, as ``Schema.from_dict`` reads it."""
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, Enum):
        return v.name
    if isinstance(v, Mapping):
        return {k: _json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json(x) for x in v]
    return v
