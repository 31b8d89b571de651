"""A served CSV's published types and refusals are the same on neighbouring files.

A real ``privframe serve`` process serves D (500 people, integer amounts) and
its neighbours (one more person whose amount is ``n/a`` or ``12.5``), each
with ``amount`` declared ``int64`` and each undeclared; an analyst connected
with ``pf.connect`` sees the same schema and metadata on every neighbour, and
a bounded sum runs (charged alike) or is refused (with the same words and no
charge) alike. A CSV that cannot be split into rows (a quote never closed)
stops the server as it starts, before any analyst is answered.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
from neighbours_setup import write_neighbours
from server_setup import ServerProcess, add_analyst, free_port

import privframe as pf
from privframe.api.server.store import Store

RHO = 0.1


def _config(folder: Path) -> tuple[Path, list[str]]:
    """A configuration serving each neighbour with amount declared and undeclared."""
    lines = ["[server]", f"port = {free_port()}", 'database = "server.db"']
    names = []
    for name, path in write_neighbours(folder).items():
        for declared in (True, False):
            dataset = f"{name}_{'int' if declared else 'text'}"
            facts = 'type = "int64", bounds = [0, 1000]' if declared else "bounds = [0, 1000]"
            lines += [
                f"[datasets.{dataset}]",
                f'data = "{path.name}"',
                'privacy_unit = "user_id"',
                "contributions = { max_rows = 1 }",
                f"metadata.amount = {{ {facts} }}",
            ]
            names.append(dataset)
    config = folder / "serve.toml"
    config.write_text("\n".join(lines) + "\n")
    return config, names


def _seen(url: str, dataset: str, token: str) -> tuple[object, ...]:
    """What an analyst sees of a dataset: its public facts, and a bounded sum's outcome."""
    sess = pf.connect(url, dataset, token, results="polars")
    try:
        query = sess.query().bound(max_rows=1).agg(pf.sum("amount", bounds=(0, 1000)))
        try:
            query.release(rho=RHO)
            outcome = "released"
        except pf.PrivframeError as err:
            outcome = f"{type(err).__name__}: {err}"
        return (dict(sess.schema), sess.metadata, outcome, sess.spent, len(sess.ledger))
    finally:
        sess.close()


def _grant_all(database: str, names: list[str]) -> str:
    """alice, granted every dataset; her token."""
    token = add_analyst(database, "alice", 1.0, names[0])
    store = Store(database)
    try:
        for dataset in names[1:]:
            store.grant("alice", dataset, pf.zCDP(1.0))
    finally:
        store.close()
    return token


def test_a_served_csv_publishes_and_refuses_alike_on_neighbours(tmp_path: Path) -> None:
    config, names = _config(tmp_path)
    token = _grant_all(str(tmp_path / "server.db"), names)
    with ServerProcess(config) as server:
        seen = {dataset: _seen(server.url, dataset, token) for dataset in names}
    declared = [seen[n] for n in names if n.endswith("_int")]
    undeclared = [seen[n] for n in names if n.endswith("_text")]
    assert len(declared) == len(undeclared) == 3
    assert all(s == declared[0] for s in declared), declared
    assert all(s == undeclared[0] for s in undeclared), undeclared
    schema, metadata, outcome, spent, entries = declared[0]
    assert (schema["amount"], metadata["amount"].type, outcome) == (pl.Int64, pl.Int64, "released")
    assert (spent, entries) == (pf.zCDP(RHO), 1)
    schema, metadata, outcome, spent, entries = undeclared[0]
    assert (schema["amount"], metadata["amount"].type) == (pl.String, None)
    assert outcome.startswith("InvalidArgumentError: sum needs a numeric column; 'amount'")
    assert 'metadata.amount = { type = "float64" }' in outcome
    assert (spent, entries) == (pf.zCDP(0), 0)


def test_a_csv_with_a_quote_never_closed_stops_the_server_at_start(tmp_path: Path) -> None:
    # One person's height 5'11" opens a quote no later row closes: the file has no rows.
    secret = "5'11\" tall-secret"
    rows = [f"{i},north,{i},5ft" for i in range(50)]
    rows.insert(25, f"50,north,10,{secret}")
    lines = ["user_id,region,amount,height", *rows]
    (tmp_path / "heights.csv").write_text("\n".join(lines) + "\n")
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[server]\nport = {free_port()}\ndatabase = "server.db"\n'
        '[datasets.heights]\ndata = "heights.csv"\nprivacy_unit = "user_id"\n'
    )
    started = subprocess.run(
        [sys.executable, "-m", "privframe", "serve", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2
    assert "datasets.heights: the data could not be read" in started.stderr
    assert "tall-secret" not in started.stderr + started.stdout
    assert "serving" not in started.stdout  # it never listened
