"""The server's schema as Python classes, and .proto files read for ApplySchema.

A ``Schema`` builds message classes from the descriptors GetSchema returns,
so a program holding only .proto files (or nothing at all) can build,
write and read records without protoc.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from google.protobuf import any_pb2, descriptor_pool, json_format
from google.protobuf import message as _message
from google.protobuf.message_factory import GetMessageClass

from protobase.v1 import protobase_pb2 as pb

TYPE_URL_PREFIX = "type.googleapis.com/"


def type_name(type_url: str) -> str:
    """Return the full message name of a type URL (the part after the last "/")."""
    return type_url.rsplit("/", 1)[-1]


class Schema:
    """Message classes for the record types of one schema version.

    Built by ``Client.schema()`` from GetSchema; holds its own descriptor
    pool, separate from the default pool that protoc-generated modules
    register in, so a generated class and a schema class of the same name
    coexist (their encoded bytes are the same).
    """

    def __init__(self, resp: pb.GetSchemaResponse) -> None:
        self.version: int = resp.version
        #: Record types by full name: primary key and indexes.
        self.types: dict[str, pb.RecordType] = {t.name: t for t in resp.types}
        self.pool = descriptor_pool.DescriptorPool()
        files = {f.name: f for f in resp.descriptors.file}
        added: set[str] = set()

        def add(name: str) -> None:
            if name in added:
                return
            added.add(name)
            fdp = files.get(name)
            if fdp is None:
                return  # a dependency the server did not send: the add below names it
            for dep in fdp.dependency:
                add(dep)
            self.pool.Add(fdp)

        for name in files:
            add(name)
        self._classes: dict[str, type[_message.Message]] = {}

    def message_class(self, name: str) -> type[_message.Message]:
        """Return the class of the message ``name`` (a full name, e.g. ``shop.User``)."""
        cls = self._classes.get(name)
        if cls is None:
            try:
                desc = self.pool.FindMessageTypeByName(name)
            except KeyError:
                raise KeyError(f"no message {name!r} in schema version {self.version}") from None
            cls = GetMessageClass(desc)
            self._classes[name] = cls
        return cls

    def new(self, name: str, /, **fields: Any) -> _message.Message:
        """Build a record of type ``name`` from keyword fields."""
        return self.message_class(name)(**fields)

    def from_dict(self, name: str, d: Mapping[str, Any]) -> _message.Message:
        """Build a record of type ``name`` from a dict in protobuf's JSON mapping.

        Keys may be the proto field names or their lowerCamelCase JSON
        names; 64-bit integers may be ints or strings.
        """
        return json_format.ParseDict(dict(d), self.message_class(name)(), descriptor_pool=self.pool)

    def decode(self, record: any_pb2.Any) -> _message.Message:
        """Decode a stored record into an instance of its schema class."""
        m = self.message_class(type_name(record.type_url))()
        m.ParseFromString(record.value)
        return m

    def to_dict(self, record: any_pb2.Any | _message.Message) -> dict[str, Any]:
        """Render a record as a dict with proto field names.

        Fields at their default value are left out, as in protobuf's JSON
        mapping; int64 values are ints (not JSON strings).
        """
        m = self.decode(record) if isinstance(record, any_pb2.Any) else record
        return _to_python(m)


def _to_python(m: _message.Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fd, v in m.ListFields():
        out[fd.name] = _field_value(fd, v)
    return out


def _field_value(fd: Any, v: Any) -> Any:
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        vfd = fd.message_type.fields_by_name["value"]
        return {k: _scalar(vfd, x) for k, x in v.items()}
    if fd.is_repeated:
        return [_scalar(fd, x) for x in v]
    return _scalar(fd, v)


def _scalar(fd: Any, v: Any) -> Any:
    if fd.message_type is not None:
        return _to_python(v)
    if fd.enum_type is not None:
        ev = fd.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else v
    return v


def read_proto_files(
    paths: Iterable[str | os.PathLike[str]], root: str | None = None
) -> dict[str, str]:
    """Read .proto files (or directories of them) keyed by import path.

    The import path is a file's path relative to ``root``; without it, a
    file's base name, or for a file found in a directory argument its path
    relative to that directory (as ``protobase schema apply`` does).
    """
    files: dict[str, str] = {}
    source: dict[str, Path] = {}
    root_path = Path(root).resolve() if root is not None else None

    def add(path: Path, base: Path) -> None:
        base = root_path or base
        try:
            key = path.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            raise ValueError(f"{path} is not under the root {base}") from None
        if key in files:
            raise ValueError(f"{source[key]} and {path} both have the import path {key!r}")
        files[key] = path.read_text(encoding="utf-8")
        source[key] = path

    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            found = sorted(p.rglob("*.proto"))
            if not found:
                raise ValueError(f"{p}: no .proto files")
            for f in found:
                add(f, p)
        else:
            add(p, p.parent)
    return files
