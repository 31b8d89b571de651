"""Shared helpers of the server tests: a dataset, a configuration, a real server process.

``served(folder)`` writes the README's synthetic transactions and a
configuration serving them; ``ServerProcess`` runs ``privframe serve`` on it
as a child process on 127.0.0.1 and waits until it answers (polling its
health route with a deadline, never a fixed sleep).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import polars as pl

import privframe as pf
from privframe.api.client import RemoteSession, tls_context
from privframe.api.query import Query
from privframe.api.server.store import Store

DATASET = "transactions"
ROWS = 20_000
REGIONS = ["north", "south", "east", "west"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_data(folder: Path, rows: int = ROWS) -> Path:
    path = folder / "transactions.parquet"
    if not path.exists():
        pf.datasets.synthetic_transactions(n_rows=rows, seed=7).write_parquet(path)
    return path


def write_config(
    folder: Path,
    *,
    port: int = 0,
    database: str = "server.db",
    cap: float | None = None,
    tls: tuple[Path, Path] | None = None,
    max_body_bytes: int | None = None,
) -> Path:
    """A configuration serving the synthetic transactions as ``transactions``."""
    write_data(folder)
    lines = ["[server]", f"port = {port or free_port()}", f'database = "{database}"']
    if tls is not None:
        lines += [f'certificate = "{tls[0]}"', f'key = "{tls[1]}"']
    if max_body_bytes is not None:
        lines.append(f"max_body_bytes = {max_body_bytes}")
    lines += [
        f"[datasets.{DATASET}]",
        'data = "transactions.parquet"',
        'privacy_unit = "user_id"',
        "contributions = { max_groups = 3, max_rows_per_group = 5 }",
        "metadata.amount = { bounds = [0, 1000] }",
        f"metadata.region = {{ keys = {REGIONS!r} }}".replace("'", '"'),
    ]
    if cap is not None:
        lines.append(f"cap = {{ rho = {cap} }}")
    path = folder / "serve.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def add_analyst(database: str, name: str, rho: float, dataset: str = DATASET) -> str:
    """A new analyst granted ``rho`` on ``dataset``; its token."""
    store = Store(database)
    try:
        token = store.add_analyst(name)
        store.grant(name, dataset, pf.zCDP(rho))
    finally:
        store.close()
    return token


def quickstart(sess: pf.Session | RemoteSession) -> Query:
    """The README's quickstart query: counts and mean amounts of adults by region."""
    return (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=3, max_rows_per_group=5)
        .group_by("region", keys=REGIONS)
        .agg(pf.count(), pf.mean("amount", bounds=(0, 1000)).alias("avg_amount"))
    )


class ServerProcess:
    """``privframe serve CONFIG`` in a child process; a context manager that stops it."""

    def __init__(self, config: Path, *, scheme: str = "http", verify: bool | str = True) -> None:
        self.config = config
        self.port = int(
            next(
                line.split("=")[1]
                for line in config.read_text().splitlines()
                if line.startswith("port")
            )
        )
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self._verify = verify
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, deadline: float = 60.0) -> ServerProcess:
        log = open(self.config.parent / "server.log", "ab")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            [sys.executable, "-m", "privframe", "serve", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PRIVFRAME_PROGRESS": "0"},
        )
        log.close()
        until = time.monotonic() + deadline
        while time.monotonic() < until:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log()}")
            try:
                answer = httpx.get(f"{self.url}/v1/health", verify=tls_context(self._verify))
                if answer.status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the server did not answer within {deadline} s: {self.log()}")

    def log(self) -> str:
        path = self.config.parent / "server.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: the server gets no chance to finish anything."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def json_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (keys and list positions), the empty path first."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += json_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += json_paths(item, (*prefix, i))
    return found


def json_set(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``body`` with ``value`` at ``path`` (in place; the empty path: ``value`` itself)."""
    if not path:
        return value
    target = body
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return body
