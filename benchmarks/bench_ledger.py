"""Ledger operations against ledger size: each should cost the same at 0 or 100k entries.

For ledgers of 0, 1k, 10k and 100k entries (a SQLite file each), the seconds
of (the fastest of ``--repeat`` runs):

* ``first open``: an :class:`~privframe.accounting.accountant.Accountant` opening a
  ledger this user never opened (an empty state directory), which verifies
  the whole file: ``PRAGMA quick_check`` and the hash chain from the first
  entry. This one is O(entries), once per user and ledger.
* ``open``: the same, by a user who opened it before (the usual case): only
  the last verified entry and the entries added since are checked.
* ``Session open``: :class:`~privframe.api.session.Session` on a small frame and
  that ledger (includes checking the ledger's record of the data).
* ``len``, ``spent``, ``report()``, ``repr(sess)``: on the open session.
* ``spend``: one more entry charged (a committed, fsynced write).
* ``last 10``: ``sess.ledger[-10:]``, read and verified from the file.
* ``20 releases``: twenty count queries released one by one.
* ``report``: ``privframe report``'s work in process (load the spec, check
  every query and the total against the ledger, release the 20 queries all
  or nothing, write 20 CSVs and ``report.html``).

Big ledgers are built through the public API, 1000 entries per
:meth:`~privframe.accounting.accountant.Accountant.spend_all` (one transaction each).
Everything runs in a temporary directory with its own ``PRIVFRAME_STATE_DIR``:
the benchmark never touches the user's record of known ledgers.

Usage:
    python benchmarks/bench_ledger.py [--sizes 0,1000,10000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

import privframe as pf
from privframe.accounting.accountant import Accountant, Spend
from privframe.api.report import load_spec, prepare

BUDGET = pf.zCDP(1.0)
BATCH = 1000
COST = pf.zCDP(1e-7)
COLUMNS = (
    "first open",
    "open",
    "Session open",
    "len",
    "spent",
    "report()",
    "repr(sess)",
    "spend",
    "last 10",
    "20 releases",
    "report",
)


def build(path: Path, n: int) -> float:
    """Charge ``n`` entries to a new ledger at ``path``, in batches; the seconds it took."""
    started = time.perf_counter()
    with Accountant(BUDGET, path) as acct:
        for first in range(0, n, BATCH):
            acct.spend_all(
                [
                    Spend(COST, f"bench/q{i}", {"query": "count", "by": ["region"], "i": i})
                    for i in range(first, min(first + BATCH, n))
                ]
            )
    return time.perf_counter() - started


def best(
    repeat: int, run: Callable[[], object], before: Callable[[], object] | None = None
) -> float:
    """The fastest of ``repeat`` timed runs of ``run`` (``before`` runs untimed each time)."""
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(path: Path, state: Path, repeat: int) -> dict[str, float]:
    frame = pl.DataFrame(
        {"user": [0, 1, 2, 3], "region": ["n", "s", "n", "s"], "x": [1.0, 2.0, 3.0, 4.0]}
    )
    fresh = iter(range(10**6))

    def forget() -> None:  # a user who never opened this ledger: an empty state directory
        os.environ["PRIVFRAME_STATE_DIR"] = str(state.parent / f"fresh-{next(fresh)}")

    def remember() -> None:
        os.environ["PRIVFRAME_STATE_DIR"] = str(state)

    out = {"first open": best(repeat, lambda: Accountant(BUDGET, path).close(), forget)}
    remember()
    Accountant(BUDGET, path).close()  # this user's record of it
    out["open"] = best(repeat, lambda: Accountant(BUDGET, path).close())
    out["Session open"] = best(repeat, lambda: pf.Session(frame, "user", BUDGET, path))
    sess = pf.Session(frame, "user", BUDGET, path)
    out["len"] = best(repeat, lambda: len(sess.ledger))
    out["spent"] = best(repeat, lambda: sess.spent)
    out["report()"] = best(repeat, sess.report)
    out["repr(sess)"] = best(repeat, lambda: repr(sess))
    out["spend"] = best(repeat, lambda: sess.accountant.spend(COST, label="bench/one"))
    out["last 10"] = best(repeat, lambda: sess.ledger[-10:])
    bounded = sess.query().bound(max_groups=1, max_rows_per_group=1)
    query = bounded.group_by("region", keys=["n", "s"]).agg(pf.count())

    def releases() -> None:
        for i in range(20):
            query.release(rho=1e-7, label=f"bench/report-{i}")

    out["20 releases"] = best(repeat, releases)
    spec = write_report(path, frame)
    out["report"] = best(
        repeat, lambda: prepare(load_spec(spec)).run(spec.parent / "out", io.StringIO())
    )
    return out


def write_report(ledger: Path, frame: pl.DataFrame) -> Path:
    """A 20-query report spec charging ``ledger``, beside its data; the spec's path."""
    folder = ledger.with_suffix(".report")
    folder.mkdir()
    frame.write_parquet(folder / "data.parquet")
    queries = "".join(
        f'\n[[queries]]\nname = "q{i}"\ngroup_by = ["region"]\n'
        f'aggregates = [{{ kind = "count" }}]\nrho = {COST.rho!r}\n'
        for i in range(20)
    )
    spec = folder / "report.toml"
    spec.write_text(
        '[report]\ntitle = "bench"\n\n[data]\npath = "data.parquet"\nprivacy_unit = "user"\n\n'
        f"[budget]\nrho = {BUDGET.rho!r}\nledger = {str(ledger)!r}\n\n"
        '[metadata]\nregion = { keys = ["n", "s"] }\n\n'
        "[contributions]\nmax_groups = 1\nmax_rows_per_group = 1\n" + queries
    )
    return spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    saved = os.environ.get("PRIVFRAME_STATE_DIR")
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="privframe-bench-ledger-") as tmp:
            for n in sizes:
                state = Path(tmp) / f"state-{n}" / "user"
                os.environ["PRIVFRAME_STATE_DIR"] = str(state)
                path = Path(tmp) / f"ledger-{n}.sqlite"
                built = build(path, n)
                rows.append((n, built, measure(path, state, args.repeat)))
    finally:
        if saved is None:
            os.environ.pop("PRIVFRAME_STATE_DIR", None)
        else:
            os.environ["PRIVFRAME_STATE_DIR"] = saved
    print(f"seconds, fastest of {args.repeat} runs; 'built' is the one-off bulk build\n")
    print("| entries | built | " + " | ".join(COLUMNS) + " |")
    print("|---:" * (len(COLUMNS) + 2) + "|")
    for n, built, times in rows:
        cells = " | ".join(f"{times[c]:.4f}" for c in COLUMNS)
        print(f"| {n:,} | {built:.2f} | {cells} |")


if __name__ == "__main__":
    main()
