"""Exceptions raised by the client, built from the server's gRPC status."""

from __future__ import annotations

import re
import socket
import ssl
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2

from protobase.v1 import protobase_pb2 as pb

_DETAILS_KEY = "grpc-status-details-bin"
_WRITE_ERROR_URL_SUFFIX = "/" + pb.WriteError.DESCRIPTOR.full_name


class ProtobaseError(Exception):
    """A failed call: the gRPC status code, the server's message and its details.

    Every exception the client raises for a failed call is one: the class
    names the status code (``NotFound``, ``Aborted``, ...) and, for a write
    or a read, is also a ``WriteError`` or a ``QueryError``. ``code`` is
    None for a failure detected by the client before anything was sent (a
    record over the server's size limit, a closed writer).

    The details are set whenever the server sent them and None otherwise:
    ``batch`` (the ordinal of the failing batch on a write stream),
    ``record`` (the failing record's index within it), ``type`` (the
    record's full type name, ``type_url`` as sent), ``field`` (the field
    path to blame), ``reason`` (the server's words about it), and for a
    condition ``condition`` (its index in the batch) and ``version`` (the
    version it found). ``reason`` is the status message when the server
    named no record.
    """

    def __init__(
        self,
        code: grpc.StatusCode | None,
        message: str,
        *,
        batch: int | None = None,
        record: int | None = None,
        type_url: str | None = None,
        field: str | None = None,
        reason: str | None = None,
        batches_applied: int = 0,
        records_applied: int = 0,
        condition: int | None = None,
        version: int | None = None,
        query: int = 0,
    ) -> None:
        super().__init__(f"{code.name if code else 'CLIENT'}: {message}")
        self.code = code
        self.message = message
        self.batch = batch
        self.record = record
        self.type_url = type_url
        self.type = type_url.rsplit("/", 1)[-1] if type_url else None
        self.field = field
        self.reason = reason
        self.batches_applied = batches_applied
        self.records_applied = records_applied
        self.condition = condition
        self.version = version
        self.query = query


class WriteError(ProtobaseError):
    """A failed write: what writers, ``apply``, ``patch`` and transactions raise.

    Raised as the class of its status code (``NotFound``,
    ``AlreadyExists``, ``InvalidArgument``, ``PermissionDenied``,
    ``Aborted``, ...), which is also a ``WriteError``: catch either.

    ``batches_applied`` and ``records_applied`` count what is durable for
    certain: everything before the failing batch, or what the server last
    acknowledged. Nothing of the failing batch is applied.
    ``condition`` is the index of the batch's condition to blame (one that
    failed, or for INVALID_ARGUMENT one that is malformed).
    """


class QueryError(ProtobaseError):
    """A failed read (search, scan, query, get, watch); on a search stream it fails alone.

    Raised as the class of its status code (``InvalidArgument``,
    ``NotFound``, ``Unauthenticated``, ...), which is also a
    ``QueryError``. ``query`` is the query's position in the list given to
    ``search``; ``field`` names the field to blame, when one is.
    """


class InvalidArgument(ProtobaseError):
    """INVALID_ARGUMENT: a malformed request, record, filter or schema; ``field`` names what."""


class NotFound(ProtobaseError):
    """NOT_FOUND: a record type, record (update, patch) or key that does not exist."""


class AlreadyExists(ProtobaseError):
    """ALREADY_EXISTS: an insert of a primary key (or unique index value) already taken."""


class PermissionDenied(ProtobaseError):
    """PERMISSION_DENIED: the API key's role or scope does not allow the call."""


class Unauthenticated(ProtobaseError):
    """UNAUTHENTICATED: the server wants an API key and got none, or an unknown one."""


class ResourceExhausted(ProtobaseError):
    """RESOURCE_EXHAUSTED: a record, batch or message over the server's limits."""


class FailedPrecondition(ProtobaseError):
    """FAILED_PRECONDITION: the server's state refuses the call (a schema change dropping data)."""


class Aborted(ProtobaseError):
    """ABORTED: a condition of a batch did not hold; nothing of the batch is applied.

    ``condition`` is the index of the failing condition in the batch,
    ``version`` the version it found (0: the record does not exist; for a
    query, the highest version among its matches, and ``reason`` also gives
    the count found) and ``record`` the batch index a record target names
    (None for key and query targets). Retrying after reading again is safe:
    ``Client.transact`` does it. ``attempts`` is how many times a
    transaction ran before giving up (1 outside of one).
    """

    attempts: int = 1


class OutOfRange(ProtobaseError):
    """OUT_OF_RANGE: a watch start (or resume) older than the changes the server keeps.

    ``oldest`` is the oldest position the server can start after (from the
    status's details; None if it sent none): ``start=oldest`` (or
    ``"oldest"``) gets what it still has, and what lies between is lost to
    this watcher, so reconcile by reading the records again.
    """

    oldest: Any = None


class DeadlineExceeded(ProtobaseError):
    """DEADLINE_EXCEEDED: the call's ``timeout`` passed before it finished."""


class Unavailable(ProtobaseError):
    """UNAVAILABLE: the server cannot be reached, or is stopping; retrying later may work."""


class Internal(ProtobaseError):
    """INTERNAL: the server failed in a way it did not expect (its log says more)."""


_BY_CODE: dict[grpc.StatusCode, type[ProtobaseError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.INTERNAL: Internal,
}

_COMBINED: dict[tuple[type[ProtobaseError], type[ProtobaseError]], type[ProtobaseError]] = {}


def error_class(code: grpc.StatusCode | None, kind: type[ProtobaseError]) -> type[ProtobaseError]:
    """Return the class raised for a status code by a call of ``kind``.

    ``kind`` is ``WriteError``, ``QueryError`` or ``ProtobaseError``. The
    class is a subclass of both the code's class and ``kind``, and bears
    the code class's name and module, so that a traceback shows
    ``protobase.errors.NotFound``. A code without a class of its own
    (UNKNOWN, CANCELLED, ...) gets ``kind`` itself.
    """
    status = _BY_CODE.get(code) if code is not None else None
    if status is None:
        return kind
    if kind is ProtobaseError:
        return status
    cls = _COMBINED.get((status, kind))
    if cls is None:
        cls = type(status.__name__, (status, kind), {"__doc__": status.__doc__})
        cls.__module__ = __name__
        cls.__qualname__ = status.__qualname__
        _COMBINED[(status, kind)] = cls
    return cls


class _AbortedWrite(Aborted, WriteError):
    """ABORTED on a write: a condition did not hold (see ``Aborted``)."""


class _OutOfRangeRead(OutOfRange, QueryError):
    """OUT_OF_RANGE on a watch (see ``OutOfRange``)."""


for _cls, _status, _kind in (
    (_AbortedWrite, Aborted, WriteError),
    (_OutOfRangeRead, OutOfRange, QueryError),
):
    _cls.__name__ = _cls.__qualname__ = _status.__name__
    _COMBINED[(_status, _kind)] = _cls

#: The ``Aborted`` a write raises, also a ``WriteError``, by another name.
ConflictError = _AbortedWrite

#: The ``OutOfRange`` a watch raises, also a ``QueryError``, by another name.
WatchOutOfRange = _OutOfRangeRead


def write_error(code: grpc.StatusCode | None, message: str, **details: Any) -> WriteError:
    """Return the exception of a failed write: the code's class, also a ``WriteError``."""
    err = error_class(code, WriteError)(code, message, **details)
    assert isinstance(err, WriteError)
    return err


def query_error(code: grpc.StatusCode | None, message: str, **details: Any) -> QueryError:
    """Return the exception of a failed read: the code's class, also a ``QueryError``."""
    err = error_class(code, QueryError)(code, message, **details)
    assert isinstance(err, QueryError)
    return err


_CODES = {c.value[0]: c for c in grpc.StatusCode}


def status_code(value: int) -> grpc.StatusCode:
    """Map a numeric google.rpc.Code to grpc.StatusCode (UNKNOWN if new)."""
    return _CODES.get(value, grpc.StatusCode.UNKNOWN)


def _details(err: grpc.RpcError) -> list[Any]:
    """Return the status details (google.protobuf.Any) of a failed call."""
    trailers: Any = err.trailing_metadata() if _is_call(err) else None
    for key, value in trailers or ():
        if key == _DETAILS_KEY:
            return list(status_pb2.Status.FromString(value).details)
    return []


def _write_detail(err: grpc.RpcError) -> pb.WriteError | None:
    for d in _details(err):
        if d.type_url.endswith(_WRITE_ERROR_URL_SUFFIX):
            return pb.WriteError.FromString(d.value)
    return None


def _bad_field(err: grpc.RpcError) -> str:
    """Return the field a google.rpc.BadRequest detail blames, if any."""
    for d in _details(err):
        if d.type_url.endswith("/google.rpc.BadRequest"):
            br = error_details_pb2.BadRequest.FromString(d.value)
            for v in br.field_violations:
                return str(v.field)
    return ""


def query_error_from_rpc(err: grpc.RpcError) -> QueryError:
    """Turn a failed read call into its exception, naming the field when the server did."""
    code, message = _code_and_message(err)
    field = _bad_field(err)
    return query_error(code, message, field=field or None, reason=message)


def _is_call(err: grpc.RpcError) -> bool:
    """Report whether err carries a status: a failed call, sync (grpc.Call) or asyncio."""
    return isinstance(err, (grpc.Call, grpc.aio.AioRpcError))


def _code_and_message(err: grpc.RpcError) -> tuple[grpc.StatusCode | None, str]:
    if isinstance(err, (grpc.Call, grpc.aio.AioRpcError)):
        code, message = err.code(), err.details() or ""
        if code == grpc.StatusCode.UNAVAILABLE:
            message = _plaintext_to_tls(message) or message
        return code, message
    return None, str(err)


# The address a failed connection names, as gRPC core writes it.
_CLOSED_AT = re.compile(r"ipv[46]:(\[[^\]]*\]|[^:\s]+):(\d+): (Socket closed|Connection reset)")


def _plaintext_to_tls(message: str) -> str | None:
    """Say what a plaintext channel's failure to a TLS server means.

    gRPC reports only that the socket closed. When the address it names
    answers a TLS handshake (or a TLS alert: it may want a client
    certificate), the server speaks TLS and the client was built without it.
    The probe sends nothing else and trusts nothing it receives.
    """
    m = _CLOSED_AT.search(message)
    if m is None:
        return None
    host, port = m.group(1).strip("[]"), int(m.group(2))
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=2) as sock,
            ctx.wrap_socket(sock, do_handshake_on_connect=True),
        ):
            pass
    except ssl.SSLError as e:
        if "ALERT" not in str(e.reason or ""):
            return None
    except OSError:
        return None
    return (
        f"the server at {m.group(1)}:{port} speaks TLS and this client connected without it: "
        "pass tls=True, or tls=TLS(ca=...) with the CA that signed its certificate, to Client"
    )


def from_rpc_error(err: grpc.RpcError) -> ProtobaseError:
    """Turn a failed call into a ProtobaseError."""
    code, message = _code_and_message(err)
    field = _bad_field(err)
    return error_class(code, ProtobaseError)(code, message, field=field or None, reason=message)


def write_error_from_rpc(
    err: grpc.RpcError, batches_acked: int = 0, records_acked: int = 0
) -> WriteError:
    """Turn a failed write stream into a WriteError with the server's details.

    Without details, the counts are what the server last acknowledged.
    """
    code, message = _code_and_message(err)
    d = _write_detail(err)
    if d is None:
        field = _bad_field(err)
        return write_error(
            code,
            message,
            field=field or None,
            reason=message,
            batches_applied=batches_acked,
            records_applied=records_acked,
        )
    has_condition = d.HasField("condition")
    return write_error(
        code,
        message,
        batch=d.batch,
        record=d.record,
        type_url=d.type_url,
        field=d.field,
        reason=d.reason,
        batches_applied=max(d.batches_applied, batches_acked),
        records_applied=max(d.records_applied, records_acked),
        condition=d.condition if has_condition else None,
        version=d.version if has_condition and code == grpc.StatusCode.ABORTED else None,
    )
