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
    """A failed call: the gRPC status code and the server's message.

    ``code`` is None for a failure detected by the client before anything
    was sent (a record over the server's size limit, a closed writer).
    """

    def __init__(self, code: grpc.StatusCode | None, message: str) -> None:
        super().__init__(f"{code.name if code else 'CLIENT'}: {message}")
        self.code = code
        self.message = message


class WriteError(ProtobaseError):
    """A failed write: the one exception type a writer raises.

    When the server named the failing record, ``batch`` is the ordinal of
    the failing batch on the stream, ``record`` its index within the batch,
    ``type`` the record's full type name, ``field`` the field path to blame
    (empty when no single field is) and ``reason`` the server's words.
    Without such details (for example the server went away) they are None.

    ``batches_applied`` and ``records_applied`` count what is durable for
    certain: everything before the failing batch, or what the server last
    acknowledged. Nothing of the failing batch is applied.

    ``condition`` is the index of the batch's condition to blame (one that
    failed, or for INVALID_ARGUMENT one that is malformed) and ``version``
    the version that condition found; both are None when no condition is
    to blame. A condition that did not hold raises ``ConflictError``.
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
    ) -> None:
        super().__init__(code, message)
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


class ConflictError(WriteError):
    """A batch refused with ABORTED: one of its conditions did not hold.

    Nothing of the batch is applied. ``condition`` is the index of the
    failing condition in the batch, ``version`` the version it found (0:
    the record does not exist; for a query, the highest version among its
    matches, and ``reason`` also gives the count found) and ``record`` the
    batch index a record target names (None for key and query targets).
    Retrying after reading again is
    safe: ``Client.transact`` does it. ``attempts`` is how many times a
    transaction ran before giving up (1 outside of one).
    """

    attempts: int = 1


class QueryError(ProtobaseError):
    """A failed query; on a search stream it fails alone.

    ``query`` is the query's position in the list given to ``search``;
    ``field`` names the field to blame, when one is.
    """

    def __init__(
        self, code: grpc.StatusCode | None, message: str, *, query: int = 0, field: str = ""
    ) -> None:
        super().__init__(code, message)
        self.query = query
        self.field = field


_CODES = {c.value[0]: c for c in grpc.StatusCode}


def status_code(value: int) -> grpc.StatusCode:
    """Map a numeric google.rpc.Code to grpc.StatusCode (UNKNOWN if new)."""
    return _CODES.get(value, grpc.StatusCode.UNKNOWN)


def _details(err: grpc.RpcError) -> list[Any]:
    """Return the status details (google.protobuf.Any) of a failed call."""
    trailers: Any = err.trailing_metadata() if isinstance(err, grpc.Call) else None
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
    """Turn a failed read call into a QueryError naming the field, when the server did."""
    code, message = _code_and_message(err)
    return QueryError(code, message, field=_bad_field(err))


def _code_and_message(err: grpc.RpcError) -> tuple[grpc.StatusCode | None, str]:
    if isinstance(err, grpc.Call):
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
    return ProtobaseError(code, message)


def write_error_from_rpc(
    err: grpc.RpcError, batches_acked: int = 0, records_acked: int = 0
) -> WriteError:
    """Turn a failed write stream into a WriteError with the server's details.

    Without details, the counts are what the server last acknowledged.
    """
    code, message = _code_and_message(err)
    cls = ConflictError if code == grpc.StatusCode.ABORTED else WriteError
    d = _write_detail(err)
    if d is None:
        return cls(code, message, batches_applied=batches_acked, records_applied=records_acked)
    has_condition = d.HasField("condition")
    return cls(
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
        version=d.version if has_condition and cls is ConflictError else None,
    )
