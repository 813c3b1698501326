"""Fixtures: the repository's server binary, built once, and servers on loopback.

Every test gets its own server (a fresh data directory, port 0), so tests
share no state; a server starts in a fraction of a second.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import selectors
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import protobase

REPO = Path(__file__).resolve().parents[2]
SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
START_TIMEOUT = 60.0


@dataclass
class Server:
    """A running ``protobase serve`` process."""

    addr: str
    data: Path
    proc: subprocess.Popen[str]
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def admin_key(self) -> str:
        return (self.data / "admin.key").read_text().strip()


def free_port() -> int:
    """A loopback port free a moment ago, below the kernel's ephemeral range.

    A port the kernel hands out (binding port 0) comes from the range it
    also draws outgoing connections' local ports from, so any connection on
    the machine may take it before a process told to listen there does; the
    ports below that range it never hands out on its own.
    """
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(200):
        port = random.randrange(10000, low) if low > 11000 else 0
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            got: int = s.getsockname()[1]
            return got
    raise RuntimeError("no free loopback port")


def first_line(proc: subprocess.Popen[str]) -> str:
    """The first line a starting process prints, or "" if none comes in time."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    ready = sel.select(timeout=START_TIMEOUT)
    sel.close()
    return proc.stdout.readline() if ready else ""


def start_server(binary: Path, data: Path, *args: str, env: dict[str, str] | None = None) -> Server:
    """Start a server on a free loopback port and wait until it serves.

    On Pebble its memtable is the smallest the server takes (16 MiB): the
    write-ahead log is preallocated at the memtable's size, and pytest keeps
    the data directories of its last three runs.
    """
    log = data.with_suffix(".log")
    if not any(a.startswith("--store") for a in args):
        args = ("--memtable-bytes", str(16 << 20), *args)
    with open(log, "w") as errf:
        proc = subprocess.Popen(
            [
                str(binary),
                "serve",
                "--data",
                str(data),
                "--grpc-addr",
                "127.0.0.1:0",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=errf,
            text=True,
            env={**os.environ, **(env or {})},
        )
    line = first_line(proc)
    m = re.match(r"protobase serving on (\S+) ", line)
    if not m:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"server did not start ({line!r}):\n{log.read_text()}")
    # Drain the rest of stdout so the server never blocks on a full pipe.
    out = proc.stdout
    assert out is not None
    threading.Thread(target=lambda: [None for _ in out], daemon=True).start()
    return Server(m.group(1), data, proc, log)


@pytest.fixture(scope="session")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the repository's protobase binary once per session."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("the tests need Go to build the server")
    out = tmp_path_factory.mktemp("bin") / "protobase"
    subprocess.run([go, "build", "-o", str(out), "./cmd/protobase"], cwd=REPO, check=True)
    return out


@pytest.fixture
def server(binary: Path, tmp_path: Path) -> Iterator[Server]:
    """A fresh server without authentication."""
    s = start_server(binary, tmp_path / "data")
    yield s
    s.stop()


@pytest.fixture
def client(server: Server) -> Iterator[protobase.Client]:
    """A client of a fresh server with the test schema (tests/schema) applied."""
    with protobase.Client(server.addr) as c:
        c.apply_schema([SCHEMA_DIR])
        yield c


@pytest.fixture(scope="session")
def shop_pb2(tmp_path_factory: pytest.TempPathFactory) -> object:
    """The test schema compiled by protoc (grpcio-tools), as a user would."""
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("gen")
    well_known = Path(protoc.__file__).parent / "_proto"
    rc = protoc.main(
        [
            "protoc",
            f"-I{SCHEMA_DIR}",
            f"-I{REPO / 'proto'}",
            f"-I{well_known}",
            f"--python_out={out}",
            "shop.proto",
        ]
    )
    assert rc == 0
    sys.path.insert(0, str(out))
    import shop_pb2  # type: ignore[import-not-found]

    return shop_pb2


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A test CA with server and client certificates (tests/certgen.go), made with Go."""
    out = tmp_path_factory.mktemp("certs")
    subprocess.run(
        ["go", "run", str(Path(__file__).parent / "certgen.go"), str(out)], cwd=REPO, check=True
    )
    return out


class Restartable:
    """A server that is killed (SIGKILL) and started again on its data directory and port."""

    def __init__(self, binary: Path, data: Path, *args: str) -> None:
        self.binary, self.data, self.args = binary, data, args
        # Its own port (free_port), not one the kernel picks: none of the
        # machine's outgoing connections takes it while the server is down.
        addr = f"127.0.0.1:{free_port()}"
        self.srv: Server = start_server(binary, data, *args, "--grpc-addr", addr)
        self.addr = self.srv.addr

    def kill_and_restart(self) -> None:
        self.srv.proc.kill()
        self.srv.proc.wait()
        self.srv = start_server(self.binary, self.data, *self.args, "--grpc-addr", self.addr)

    def write(self, ids: range) -> int:
        """Insert users ids on a client of its own; return the last commit."""
        with protobase.Client(self.addr) as c, c.writer("insert") as w:
            for i in ids:
                w.write({"id": i}, type="pytest.shop.User")
        return w.close().position


@pytest.fixture
def restartable(binary: Path, tmp_path: Path) -> Iterator[Callable[..., Restartable]]:
    made: list[Restartable] = []

    def make(*args: str) -> Restartable:
        r = Restartable(binary, tmp_path / "data", *args)
        made.append(r)
        return r

    yield make
    for r in made:
        r.srv.stop()
