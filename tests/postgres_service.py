"""A real PostgreSQL server for the tests, in a temporary folder on 127.0.0.1, stopped after.

:func:`postgres_url` is a session-scoped pytest fixture; a test module uses it
by importing it (``from postgres_service import postgres_url``). It runs the
installed PostgreSQL's own ``initdb`` and ``pg_ctl`` (found with ``pg_config
--bindir``, else under ``/usr/lib/postgresql/*/bin``), as the ``postgres``
operating-system user when the tests run as root (PostgreSQL refuses root),
with trust authentication on a free loopback port and no Unix socket outside
its folder. Readiness is polled with a deadline, never slept for; the
server is stopped (``pg_ctl stop -m fast``) when the session ends, also
after a failure, and by an ``atexit`` hook if the run is interrupted.

Without PostgreSQL the tests that need it are skipped, except in CI (the
``CI`` environment variable set), where they fail: ``.ci/run`` installs it
(``apt-get install postgresql``). :func:`fresh_schema` gives each test an
empty schema of its own in the one server, and :func:`database_url` runs a
test on both of the server's databases: a new SQLite file, and a new schema
in PostgreSQL.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

LOOPBACK = "127.0.0.1"
START_TIMEOUT = 60.0
"""Seconds PostgreSQL may take to accept connections."""
_POLL = 0.1
_DATABASE = "privframe_test"


def _bindir() -> Path | None:
    """The folder of the installed PostgreSQL server's programs, or None."""
    config = shutil.which("pg_config")
    if config is not None:
        done = subprocess.run([config, "--bindir"], capture_output=True, text=True, check=False)
        folder = Path(done.stdout.strip())
        if done.returncode == 0 and (folder / "initdb").is_file():
            return folder
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _as_server_user(command: list[str]) -> list[str]:
    """``command`` run as the ``postgres`` user when this process is root."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _run(command: list[str], folder: Path) -> None:
    done = subprocess.run(
        _as_server_user(command), capture_output=True, text=True, check=False, cwd=folder
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")


class PostgresServer:
    """One PostgreSQL server in ``folder``, listening on ``port`` of the loopback interface."""

    def __init__(self, bindir: Path, folder: Path) -> None:
        self.bindir = bindir
        self.folder = folder
        self.data = folder / "data"
        self.log = folder / "server.log"
        self.port = _free_port()
        self.started = False

    def url(self, database: str = _DATABASE) -> str:
        return f"postgresql://postgres@{LOOPBACK}:{self.port}/{database}"

    def start(self) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        initdb = [str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres"]
        _run([*initdb, "--auth=trust", "--encoding=UTF8", "--no-sync"], self.folder)
        options = (
            f"-p {self.port} -c listen_addresses={LOOPBACK} "
            f"-c unix_socket_directories={self.folder} -c max_connections=200"
        )
        pg_ctl = str(self.bindir / "pg_ctl")
        _run([pg_ctl, "-D", str(self.data), "-l", str(self.log), "-o", options, "-W", "start"],
             self.folder)  # fmt: skip
        self.started = True
        self._wait()
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {_DATABASE}")

    def _wait(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    log = self.log.read_text() if self.log.exists() else "(no log)"
                    raise RuntimeError(
                        f"PostgreSQL did not accept connections in {START_TIMEOUT:g} s:\n{log}"
                    ) from None
            time.sleep(_POLL)

    def stop(self) -> None:
        if self.started:
            self.started = False
            pg_ctl = str(self.bindir / "pg_ctl")
            with contextlib.suppress(RuntimeError):
                _run([pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop"], self.folder)
        shutil.rmtree(self.folder, ignore_errors=True)


def fresh_schema(url: str) -> str:
    """``url`` with its own new, empty schema first on the search path (one per test)."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{url}?options=-csearch_path%3D{schema}"


_SERVER: list[PostgresServer] = []
"""The one server of this test session, shared by every module that imports the fixture."""


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of a database on the PostgreSQL server started for this test session.

    Each module importing this fixture gets its own (session-scoped) copy of
    it; they share one server, started by the first and stopped by the first
    teardown, at the end of the session (or at exit, if the run is cut short).
    """
    if not _SERVER:
        bindir = _bindir()
        if bindir is None:
            if os.environ.get("CI"):
                pytest.fail(
                    "PostgreSQL is not installed: .ci/run installs it (apt-get install "
                    "postgresql); the PostgreSQL tests must not be skipped in CI"
                )
            pytest.skip("PostgreSQL is not installed (apt-get install postgresql); runs in CI")
        server = PostgresServer(bindir, Path(tempfile.mkdtemp(prefix="privframe-pg-")))
        atexit.register(server.stop)
        _SERVER.append(server)
        try:
            server.start()
        except BaseException:
            server.stop()
            raise
    server = _SERVER[0]
    if not server.started:
        pytest.fail("the PostgreSQL server of this session did not start (see the first error)")
    try:
        yield server.url()
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database: a SQLite file path, or a ``postgresql://`` URL of a new schema."""
    if request.param == "sqlite":
        return str(tmp_path / "server.db")
    return fresh_schema(request.getfixturevalue("postgres_url"))
