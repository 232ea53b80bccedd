"""Starts a real `chime up` (its own database and AMQP prefix) for the whole test session.

The binary is `$CHIME_BIN`, else the repository's `target/debug/chime` (`cargo build --bin
chime`); the servers are `$CHIME_TEST_DATABASE_URL` and `$CHIME_TEST_AMQP_URL`, as the Rust
suite's (PostgreSQL reached with `psql` to make and drop the database)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Dict, Iterator

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _psql(server: str, statement: str) -> None:
    subprocess.run(
        ["psql", f"{server.rstrip('/')}/postgres", "-qc", statement],
        check=True,
        capture_output=True,
    )


class Chime:
    """A running `chime up` the tests may stop and start again (same database and prefix)."""

    def __init__(self) -> None:
        self.binary = os.environ.get("CHIME_BIN") or str(REPO / "target/debug/chime")
        self.server = os.environ.get("CHIME_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432")
        self.amqp = os.environ.get("CHIME_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
        name = uuid.uuid4().hex[:12]
        self.database = f"chime_py_{name}"
        self.prefix = f"py{name}"
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: "subprocess.Popen[bytes] | None" = None
        self.log = REPO / "target" / f"pytest-chime-{name}.log"

    def env(self) -> Dict[str, str]:
        env = dict(os.environ)
        env.update(
            CHIME_DATABASE_URL=f"{self.server.rstrip('/')}/{self.database}",
            CHIME_AMQP_URL=self.amqp,
            CHIME_PREFIX=self.prefix,
            CHIME_CONFIG="/nonexistent/chime.toml",
            CHIME_WORKER__ALLOW_OPEN_STORE="true",
        )
        env.pop("CHIME_API_TOKEN", None)
        return env

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log, "ab")
        self.process = subprocess.Popen(
            [self.binary, "up", "--api-addr", f"127.0.0.1:{self.port}"],
            env=self.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chime up exited: see {self.log}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"chime up was not ready within 60 s: see {self.log}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def chime(self, *args: str) -> str:
        """Runs the CLI against this installation; returns its standard output."""
        env = self.env()
        env["CHIME_API_URL"] = self.url
        done = subprocess.run([self.binary, *args], env=env, capture_output=True, check=True)
        return done.stdout.decode()


@pytest.fixture(scope="session")
def chime_up() -> Iterator[Chime]:
    chime = Chime()
    _psql(chime.server, f'CREATE DATABASE "{chime.database}"')
    try:
        chime.start()
        yield chime
    finally:
        chime.stop()
        _psql(chime.server, f'DROP DATABASE IF EXISTS "{chime.database}" WITH (FORCE)')


@pytest.fixture
def api(chime_up: Chime, monkeypatch: pytest.MonkeyPatch) -> Chime:
    """The installation, with `CHIME_API_URL` set as a user sets it."""
    monkeypatch.setenv("CHIME_API_URL", chime_up.url)
    monkeypatch.delenv("CHIME_API_TOKEN", raising=False)
    return chime_up
