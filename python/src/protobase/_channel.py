"""A client's channel: TLS settings, options, and the rule for API keys over plaintext."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import grpc

from protobase._writer import CHANNEL_MAX_SEND


@dataclass(frozen=True)
class TLS:
    """TLS settings: the CA to trust and, for mutual TLS, a client certificate.

    Each of ``ca``, ``cert`` and ``key`` is a PEM file path or PEM bytes;
    without ``ca`` the system's roots are trusted. ``server_name`` checks
    the server's certificate for another name than the address's host.
    """

    ca: str | bytes | None = None
    cert: str | bytes | None = None
    key: str | bytes | None = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        """Return the gRPC channel credentials."""
        return grpc.ssl_channel_credentials(
            root_certificates=_pem(self.ca),
            private_key=_pem(self.key),
            certificate_chain=_pem(self.cert),
        )


def _pem(v: str | bytes | None) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    with open(v, "rb") as f:
        return f.read()


def is_loopback(addr: str) -> bool:
    """Report whether addr ("host:port") names this machine's loopback interface."""
    host = addr.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def channel_options(
    addr: str,
    api_key: str | None,
    tls: bool | TLS | grpc.ChannelCredentials | None,
    options: Iterable[tuple[str, Any]],
) -> tuple[list[tuple[str, Any]], grpc.ChannelCredentials | None]:
    """Return a client's channel options and credentials (None: plaintext).

    Refuses an API key over plaintext to an address that is not loopback.
    """
    opts: list[tuple[str, Any]] = [
        ("grpc.max_send_message_length", CHANNEL_MAX_SEND),
        ("grpc.max_receive_message_length", 64 << 20),
        # After a server restart, a channel reconnects within a few
        # seconds rather than gRPC's default of up to two minutes, so
        # that a resuming watch and the next calls do not wait for it.
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2000),
    ]
    if isinstance(tls, TLS) and tls.server_name:
        opts.append(("grpc.ssl_target_name_override", tls.server_name))
    opts.extend(options)
    if tls is None or tls is False:
        if api_key and not is_loopback(addr):
            raise ValueError(
                "refusing to send the API key over plaintext to a non-loopback "
                "address; pass tls=True or tls=TLS(ca=...)"
            )
        return opts, None
    if tls is True:
        return opts, grpc.ssl_channel_credentials()
    if isinstance(tls, TLS):
        return opts, tls.credentials()
    return opts, tls
