"""The real server process on 127.0.0.1, driven by the real client (``pf.connect``).

* the README quickstart run remotely has the noise distribution of a local run
  (two-sample Kolmogorov-Smirnov at alpha = 1e-3 on 240 released counts each);
* 16 analysts releasing 100 times each at once never overspend their budgets
  nor the dataset's cap, and every answered release is one ledger entry;
* a server killed (SIGKILL) mid-release and restarted has a consistent ledger
  holding every release it answered;

these two on both databases: SQLite, and a real PostgreSQL server the tests start.
(The dashboard in headless Chromium: test_dashboard_in_chromium.py.)
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import httpx
import polars as pl
import pytest
from postgres_service import database_url, postgres_url  # noqa: F401  (fixtures)
from scipy import stats
from server_setup import DATASET, REGIONS, ServerProcess, add_analyst, quickstart, write_config

import privframe as pf
from privframe.api.server.config import load_config
from privframe.api.server.store import Store
from privframe.errors import BudgetExceededError, ServerError

ALPHA = 1e-3


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(write_config(tmp_path, cap=12.0)) as running:
        yield running


def _database(server: ServerProcess) -> str:
    return load_config(server.config).database


@pytest.mark.slow
@pytest.mark.statistical
def test_the_quickstart_run_remotely_has_the_local_noise_distribution(
    server: ServerProcess,
) -> None:
    token = add_analyst(_database(server), "alice", 100.0)
    remote = pf.connect(server.url, DATASET, token, results="polars")
    data = pl.read_parquet(load_config(server.config).datasets[DATASET].data)
    local = pf.Session(data, "user_id", pf.zCDP(100.0))
    remote_counts, local_counts = [], []
    for _ in range(60):
        remote_counts += quickstart(remote).release(rho=0.02)["count"].to_list()
        local_counts += quickstart(local).release(rho=0.02)["count"].to_list()
    # Same data, same plan: the same exact counts per region plus noise of one distribution.
    by_region = [stats.ks_2samp(remote_counts[i::4], local_counts[i::4]).pvalue for i in range(4)]
    assert min(by_region) > ALPHA / 4, by_region
    assert remote.spent == pf.zCDP(Fraction(60 * 2, 100))
    remote.close()


@pytest.mark.slow
def test_sixteen_analysts_releasing_at_once_never_overspend(
    tmp_path: Path,
    database_url: str,  # noqa: F811  (a fixture: SQLite, then PostgreSQL)
) -> None:
    with ServerProcess(write_config(tmp_path, cap=12.0, database=database_url)) as server:
        _sixteen_analysts(server, database_url)


def _sixteen_analysts(server: ServerProcess, database: str) -> None:
    tokens = {f"analyst{i}": add_analyst(database, f"analyst{i}", 1.0) for i in range(16)}
    answered: dict[str, list[str]] = {name: [] for name in tokens}
    refused: dict[str, int] = dict.fromkeys(tokens, 0)
    unexpected: list[str] = []

    def run(name: str) -> None:
        sess = pf.connect(server.url, DATASET, tokens[name], results="polars")
        query = sess.query().bound(max_groups=1, max_rows_per_group=1).agg(pf.count())
        for i in range(100):
            try:
                query.release(rho=0.02, label=f"{name}/{i}")
                answered[name].append(f"{name}/{i}")
            except BudgetExceededError:
                refused[name] += 1
            except Exception as err:  # reported below: the test must see every failure
                unexpected.append(f"{type(err).__name__}: {err}")
        sess.close()

    threads = [threading.Thread(target=run, args=(name,)) for name in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert unexpected == []
    store = Store(database)
    try:
        total = Fraction(0)
        for name in tokens:
            ledger = store.ledger(name, DATASET)
            entries = [e.label for e in ledger.entries]
            assert sorted(entries) == sorted(answered[name])  # each answer is one entry
            spent = ledger.totals()[0]
            assert spent <= 1
            assert spent == Fraction(len(entries), 50)
            total += spent
            ledger.close()
        assert total == 12  # the cap, reached exactly and not passed
        assert store.pool_spent(DATASET) == pf.zCDP(12)
    finally:
        store.close()
    assert sum(len(a) for a in answered.values()) == 600
    assert sum(refused.values()) == 1600 - 600


@pytest.mark.slow
def test_a_server_killed_mid_release_restarts_with_a_consistent_ledger(
    tmp_path: Path,
    database_url: str,  # noqa: F811
) -> None:
    config = write_config(tmp_path, database=database_url)
    database = load_config(config).database
    token = add_analyst(database, "alice", 100.0)
    answered: list[str] = []
    with ServerProcess(config) as server:
        stop = threading.Event()

        def run(worker: int) -> None:
            sess = pf.connect(server.url, DATASET, token, results="polars")
            i = 0
            while not stop.is_set():
                label = f"w{worker}/{i}"
                try:
                    quickstart(sess).release(rho=0.01, label=label)
                    answered.append(label)
                except ServerError:
                    return  # the server is gone
                i += 1

        threads = [threading.Thread(target=run, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        while len(answered) < 40:
            threading.Event().wait(0.01)
        server.kill()  # mid-release: four clients are waiting for answers
        stop.set()
        for thread in threads:
            thread.join()
    with ServerProcess(config) as server:
        sess = pf.connect(server.url, DATASET, token, results="polars")
        entries = sess.ledger
        labels = {e.label for e in entries}
        assert set(answered) <= labels  # nothing was answered before its charge was durable
        assert len(labels) == len(entries)
        assert sess.spent == pf.zCDP(Fraction(len(entries), 100))
        quickstart(sess).release(rho=0.01, label="after")  # and it goes on charging
        assert len(sess.ledger) == len(entries) + 1
        sess.close()
    store = Store(database)
    ledger = store.ledger("alice", DATASET)
    ledger.verify()  # the hash chain and the totals, from the first entry
    ledger.close()
    store.close()


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (openssl, which ships with Python's ssl)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = folder / "server.pem", folder / "server-key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_the_server_speaks_https_when_given_a_certificate(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    config = write_config(tmp_path, tls=(cert, key))
    token = add_analyst(load_config(config).database, "alice", 1.0)
    with ServerProcess(config, scheme="https", verify=str(cert)) as server:
        sess = pf.connect(server.url, DATASET, token, results="polars", verify=str(cert))
        assert quickstart(sess).release(rho=0.1).height == len(REGIONS)
        sess.close()
        with pytest.raises(ServerError, match=r"CERTIFICATE_VERIFY_FAILED|certificate"):
            pf.connect(server.url, DATASET, token)  # the system's CAs do not know it
        with pytest.raises(ServerError):
            pf.connect(server.url.replace("https", "http"), DATASET, token)


def test_a_request_stuck_on_the_database_does_not_hold_up_the_others(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    database = load_config(config).database
    token = add_analyst(database, "alice", 1.0)
    with ServerProcess(config) as server:
        lock = sqlite3.connect(database, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")  # as a backup or an admin command might, for a while
        stuck = threading.Thread(
            target=httpx.get,
            args=(f"{server.url}/v1/datasets",),
            kwargs={"headers": {"Authorization": f"Bearer {token}"}, "timeout": 120},
        )
        stuck.start()
        try:
            start = time.monotonic()
            assert httpx.get(f"{server.url}/v1/health", timeout=120).status_code == 200
            assert time.monotonic() - start < 10  # not the database's 30 s busy timeout
            assert stuck.is_alive()  # the other request is still waiting for the database
        finally:
            lock.execute("ROLLBACK")
            lock.close()
            stuck.join()
