"""A private join of two 1 M-row tables: privframe against a plain polars join and Tumult.

Issue 31's benchmark, in one run. Two synthetic private tables about the same
people, written once as parquet (seeded): ``visits`` (``pid``, ``region``,
``cost``) and ``prescriptions`` (``pid``, ``drug``, ``days``), ``--rows`` rows
each over ``--patients`` patients (default rows/5). A patient's rows in each
table are drawn with a lognormal activity, so most patients have a few rows and
some have dozens; 80% of a patient's visits are in their home region, and the
50 regions are Zipf-skewed.

The query: join visits and prescriptions on ``pid``, then per region over the
50 public keys, count the joined rows and sum ``days`` clipped to [0, 90]. The
private variants keep at most l = ``--left-rows`` visits and r =
``--right-rows`` prescriptions per patient before the join (so at most l·r
joined rows per patient), privacy unit ``pid``, ρ = 1 zCDP for the query.

Variants, each in its own subprocess (Tumult in its ``peers.py`` virtualenv),
each timing whole runs on data already in memory after one untimed warm-up run.
The local variants take turns in ``--rounds`` rounds of fresh processes,
``--repeat`` timed runs each, so that load from other work on a shared machine
falls on all of them alike; Tumult runs once (a JVM to start), ``--peer-repeat``
timed runs:

* ``join_agg`` (the floor): a plain polars inner join on ``pid`` and the same
  grouped count and clipped sum, lazy, no truncation and no noise.
* ``join``: the plain polars inner join alone, materialised.
* ``truncated``: privframe's join step alone (``engines/spec.py``
  ``apply_steps``: each patient's l and r rows chosen under a fresh key, then
  the join), then the grouped count and sum in plain polars, no noise: the
  same exact answer privframe noises, without its planning, bounding, noise or
  ledger.
* ``privframe``: ``Session({"visits": ..., "prescriptions": ...}, "pid",
  zCDP(1))``, ``query("visits").join_private(query("prescriptions"), on="pid",
  left_rows=l, right_rows=r)``, ``bound(max_rows=l·r)``, ``group_by("region",
  keys=...)``, ``agg(count, sum)``, ``release(rho=1)``.
* ``tumult``: Tumult Analytics on Spark local, both tables
  ``AddRowsWithID("pid")`` in one ID space, ``enforce(MaxRowsPerID(l))`` and
  ``enforce(MaxRowsPerID(r))`` on the two sides, then ``join_private`` on
  ``pid`` (Tumult propagates the limits to ``MaxRowsPerID(l·r)`` on the joined
  table), ``groupby(KeySet)``; one aggregation per query, so a count query and a
  sum query at ρ/2 each. Tumult ignores ``join_private``'s
  ``truncation_strategy_*`` on tables with IDs (they serve its row-level
  ``AddMaxRows`` tables); per-ID limits are how it bounds a person's rows.

The two private variants have the same contribution bound (l·r rows per
patient): both count σ and sum σ come from each library's own API. As a check
that they run the same query, the notes give the joined rows after truncation
(Σ over patients of min(visits, l)·min(prescriptions, r), which does not depend
on which rows are kept) beside each library's released total count.

Usage:
    python benchmarks/bench_joins.py                         # 1 M rows per table (about 4 min)
    python benchmarks/bench_joins.py --peers ''              # privframe and the floors only
    python benchmarks/bench_joins.py --rows 100000 --save results.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import compare  # noqa: E402  (a sibling script, not a package)
import peers  # noqa: E402

RHO = 1.0
LOWER, UPPER = 0, 90  # bounds of days
N_REGIONS, N_DRUGS = 50, 100
LOCAL = ("join_agg", "join", "truncated", "privframe")
PEER_VENV = {"tumult": "tumult"}
LABELS = {
    "join_agg": "polars join + group_by (floor)",
    "join": "polars join alone",
    "truncated": "privframe join step + polars group_by (no noise)",
    "privframe": "privframe join_private",
    "tumult": "Tumult join_private (Spark local)",
}

# -- data ----------------------------------------------------------------------------------


def region_names() -> list[str]:
    return [f"region_{i:02d}" for i in range(N_REGIONS)]


def _owners(rng: np.random.Generator, patients: int, rows: int) -> np.ndarray:
    """Each row's patient: lognormal activity, so a few rows each and a long tail."""
    activity = rng.lognormal(0.0, 0.75, patients)
    return rng.choice(patients, size=rows, p=activity / activity.sum())


def make_tables(rows: int, patients: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The seeded visits and prescriptions tables, ``rows`` rows each."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, N_REGIONS + 1) ** 1.1
    popularity /= popularity.sum()
    home = rng.choice(N_REGIONS, size=patients, p=popularity)
    pid = _owners(rng, patients, rows)
    elsewhere = rng.choice(N_REGIONS, size=rows, p=popularity)
    region = np.where(rng.random(rows) < 0.8, home[pid], elsewhere)
    visits = pl.DataFrame(
        {
            "pid": pid.astype(np.int64),
            "region": pl.Series(region_names()).gather(region.astype(np.uint32)),
            "cost": rng.lognormal(4.0, 1.0, rows),
        }
    )
    drugs = pl.Series([f"drug_{i:03d}" for i in range(N_DRUGS)])
    prescriptions = pl.DataFrame(
        {
            "pid": _owners(rng, patients, rows).astype(np.int64),
            "drug": drugs.gather(rng.integers(0, N_DRUGS, rows).astype(np.uint32)),
            "days": rng.integers(1, 91, rows),
        }
    )
    return visits, prescriptions


def write_tables(rows: int, patients: int, seed: int, data_dir: Path) -> dict[str, str]:
    """The two tables as parquet, written once per (rows, patients, seed) and reused."""
    data_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        name: data_dir / f"joins_{name}_{rows}_{patients}_{seed}.parquet"
        for name in ("visits", "prescriptions")
    }
    if not all(p.exists() for p in paths.values()):
        for name, frame in zip(paths, make_tables(rows, patients, seed), strict=True):
            tmp = paths[name].with_suffix(".tmp")
            frame.write_parquet(tmp)
            tmp.replace(paths[name])  # atomic: a killed run never leaves half a file
    return {name: str(p) for name, p in paths.items()}


def joined_rows(paths: dict[str, str], left_rows: int, right_rows: int) -> dict[str, int]:
    """Rows of the plain join, and of the join after truncating each patient to l and r rows."""
    per = [
        pl.read_parquet(paths[t], columns=["pid"]).group_by("pid").len(name=t)
        for t in ("visits", "prescriptions")
    ]
    both = per[0].join(per[1], on="pid")
    plain = (both["visits"].cast(pl.Int64) * both["prescriptions"]).sum()
    truncated = (
        both["visits"].clip(upper_bound=left_rows).cast(pl.Int64)
        * both["prescriptions"].clip(upper_bound=right_rows)
    ).sum()
    return {"plain": int(plain), "truncated": int(truncated)}


# -- code run inside every subprocess, after compare.PREAMBLE ----------------------------

# One untimed warm-up run (its time is kept), then CFG["repeat"] timed runs.
LOOP = r'''
def runs(fn):
    """Seconds of the warm-up run, of each timed run of fn(), and the last run's result."""
    t0 = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(CFG["repeat"]):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return first, times, out
'''

LOCAL_SNIPPET = r"""
sys.path.insert(0, CFG["bench_dir"])
import bench_joins

result = bench_joins.local_variant(CFG, runs)
result["peak_kib"] = peak_kib()
print(json.dumps(result))
"""

TUMULT_SNIPPET = (
    compare.TUMULT_SPARK
    + r"""import tmlt.analytics
from tmlt.analytics import (
    AddRowsWithID, KeySet, MaxRowsPerID, QueryBuilder, RhoZCDPBudget, Session,
)

tables = {}
for name, path in CFG["paths"].items():
    tables[name] = spark.read.parquet(path).cache()
    tables[name].count()  # into memory before the timer, like every other variant
keys = KeySet.from_dict({"region": CFG["keys"]})
grouped = (
    QueryBuilder("visits")
    .enforce(MaxRowsPerID(CFG["left_rows"]))
    .join_private(
        QueryBuilder("prescriptions").enforce(MaxRowsPerID(CFG["right_rows"])),
        join_columns=["pid"],
    )
    .groupby(keys)
)
# One aggregation per query: two queries, the session's rho split evenly.
queries = {
    "count": grouped.count(name="count", mechanism="gaussian"),
    "days_sum": grouped.sum("days", CFG["lower"], CFG["upper"], name="days_sum",
                            mechanism="gaussian"),
}
share = RhoZCDPBudget(CFG["rho"] / len(queries))


def new_session():
    builder = Session.Builder().with_privacy_budget(RhoZCDPBudget(CFG["rho"]))
    builder = builder.with_id_space("patients")
    for name, frame in tables.items():
        builder = builder.with_private_dataframe(
            name, frame, protected_change=AddRowsWithID("pid", id_space="patients")
        )
    return builder.build()


def release():
    sess = new_session()
    return {name: sess.evaluate(q, share).toPandas() for name, q in queries.items()}


info = {k: new_session()._noise_info(q, share)[0] for k, q in queries.items()}
first, times, out = runs(release)
# Tumult's Gaussian noise parameter is the variance.
sigma = {k: math.sqrt(float(i["noise_parameter"])) for k, i in info.items()}
print(json.dumps({
    "version": "tmlt.analytics " + getattr(tmlt.analytics, "__version__", "?")
    + ", pyspark " + spark.version,
    "first": first,
    "times": times,
    "total_count": float(out["count"]["count"].sum()),
    "sigma": {"count": sigma["count"], "sum": sigma["days_sum"]},
    "noise": ", ".join(sorted({i["noise_mechanism"].name for i in info.values()})),
    "split": "two queries (one aggregation each) at rho/2: count, sum of days over [0, 90]",
    "peak_kib": peak_kib(),
}))
spark.stop()
"""
)


# -- local variants (run in this interpreter's subprocess) ---------------------------------


def privframe_query(sess: Any, cfg: dict[str, Any]) -> Any:
    """The benchmark's private query on a session of the two tables."""
    import privframe as pf

    left, right = cfg["left_rows"], cfg["right_rows"]
    return (
        sess.query("visits")
        .join_private(sess.query("prescriptions"), on="pid", left_rows=left, right_rows=right)
        .bound(max_rows=left * right)
        .group_by("region", keys=cfg["keys"])
        .agg(pf.count(), pf.sum("days", bounds=(cfg["lower"], cfg["upper"])))
    )


def local_variant(cfg: dict[str, Any], runs: Any) -> dict[str, Any]:
    """Timed runs of one of ``LOCAL``'s variants, on the tables read into memory."""
    visits = pl.read_parquet(cfg["paths"]["visits"])
    prescriptions = pl.read_parquet(cfg["paths"]["prescriptions"])
    name = cfg["variant"]
    if name == "join":
        first, times, out = runs(lambda: visits.join(prescriptions, on="pid", how="inner"))
        return {"first": first, "times": times, "joined": out.height}
    if name == "join_agg":

        def floor() -> pl.DataFrame:
            return (
                visits.lazy()
                .join(prescriptions.lazy(), on="pid", how="inner")
                .group_by("region")
                .agg(
                    pl.len().alias("count"),
                    pl.col("days").clip(cfg["lower"], cfg["upper"]).sum().alias("days_sum"),
                )
                .collect()
            )

        first, times, out = runs(floor)
        return {"first": first, "times": times, "total_count": float(out["count"].sum())}
    if name == "truncated":
        from privframe.engines.spec import PrivateJoin, apply_steps

        step = PrivateJoin(
            "prescriptions", (), ("pid",), "inner", cfg["left_rows"], cfg["right_rows"]
        )
        tables = {"prescriptions": prescriptions.lazy()}

        def truncated() -> pl.DataFrame:
            # privframe's own join step (engines/spec.py: each side truncated per
            # patient, then joined), then a plain group_by: no planning, bounding,
            # noise or ledger.
            joined = apply_steps(
                visits.lazy(), (step,), unit="pid", tables=tables, seed=random.getrandbits(63)
            )
            return (
                joined.group_by("region")
                .agg(
                    pl.len().alias("count"),
                    pl.col("days").clip(cfg["lower"], cfg["upper"]).sum().alias("days_sum"),
                )
                .collect()
            )

        first, times, out = runs(truncated)
        return {"first": first, "times": times, "total_count": float(out["count"].sum())}
    import privframe as pf

    tables = {"visits": visits, "prescriptions": prescriptions}
    budget = pf.zCDP(cfg["rho"])

    def release() -> Any:
        sess = pf.Session(tables, "pid", budget)
        return privframe_query(sess, cfg).release(rho=cfg["rho"])

    first, times, out = runs(release)
    sess = pf.Session(tables, "pid", budget)
    explanation = privframe_query(sess, cfg).explain(rho=cfg["rho"])
    std = {r["output"]: float(r["std"]) for r in explanation.rows}  # type: ignore[arg-type]
    shares = {m.kind: float(m.exact_share) for m in explanation.measurements}
    return {
        "version": f"privframe {importlib.metadata.version('privframe')}",
        "first": first,
        "times": times,
        "total_count": float(out["count"].sum()),
        "sigma": {"count": std["count"], "sum": std["days_sum"]},
        "noise": "discrete Gaussian",
        "split": f"planner: count {shares['count']:.4f} rho, centred sum (days − 45 in "
        f"[−45, 45]) {shares['centred_sum']:.4f} rho; sum = centred + 45·count",
        "bound": explanation.bound,
    }


# -- driver --------------------------------------------------------------------------------


def run_variant(name: str, cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """One variant's result dict, or {"error": reason} when it cannot run."""
    cfg = {**cfg, "variant": name}
    code = compare.PREAMBLE + LOOP
    try:
        if name in LOCAL:
            return peers.run_python(
                sys.executable, code + LOCAL_SNIPPET, [json.dumps(cfg)], args.timeout
            )
        venv = PEER_VENV[name]
        if args.skip_missing and not peers.is_installed(venv):
            return {
                "error": f"the {venv!r} virtualenv is not installed; run without --skip-missing "
                f"or `python benchmarks/peers.py {venv}` to install it"
            }
        cfg["repeat"] = args.peer_repeat
        return peers.run_snippet(venv, code + TUMULT_SNIPPET, [json.dumps(cfg)], args.timeout)
    except peers.PeerError as exc:
        return {"error": str(exc)}


def _merged(done: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """One variant's results over its rounds: all timed runs, every warm-up, the largest peak."""
    if done is None or "error" in done:
        return {**new, "first": [new["first"]]} if "error" not in new else new
    if "error" in new:
        return done
    return {
        **new,
        "times": done["times"] + new["times"],
        "first": done["first"] + [new["first"]],
        "peak_kib": max(done["peak_kib"], new["peak_kib"]),
    }


def _ratio(x: float, y: float) -> str:
    return f"{x / y:.2f}" if y else "n/a"


def _sigma(r: dict[str, Any], key: str) -> str:
    return f"{r['sigma'][key]:,.1f}" if "sigma" in r else "-"


def report(
    results: dict[str, dict[str, Any]],
    args: argparse.Namespace,
    loads: dict[str, tuple],
    rows: dict[str, int],
) -> dict[str, float]:
    """The header, the table and the notes, as markdown and comments; returns the ratios."""
    left, right = args.left_rows, args.right_rows
    print(
        f"# private join: visits and prescriptions, {args.rows:,} rows each, "
        f"{args.patients:,} patients, {N_REGIONS} public regions (seed {args.seed})"
    )
    print(f"# {dt.date.today().isoformat()}; {compare.machine()}")
    print(
        f"# query: visits ⋈ prescriptions on pid, then per region count and sum of days in "
        f"[{LOWER}, {UPPER}]; private: <= {left} visits and <= {right} prescriptions per patient "
        f"(<= {left * right} joined rows), rho = {RHO:g}"
    )
    ok = {k: v for k, v in results.items() if "error" not in v}
    med = {k: statistics.median(v["times"]) for k, v in ok.items()}
    low = {k: min(v["times"]) for k, v in ok.items()}

    def ratio(a: str, b: str) -> str:
        if a not in ok or b not in ok:
            return "n/a"
        return f"{_ratio(med[a], med[b])} ({_ratio(low[a], low[b])})"

    header = (
        "| variant | runs | median s | min s | first s | / privframe | / join + group_by "
        "| / join alone | / truncated join | peak MiB | count σ | sum σ |"
    )
    print(header)
    print("|:--|" + "--:|" * (header.count("|") - 2))
    for name, res in results.items():
        if "error" in res:
            print(f"| {LABELS[name]} | n/a ({res['error']}) |" + " |" * (header.count("|") - 3))
            continue
        cells = [
            LABELS[name],
            str(len(res["times"])),
            f"{med[name]:.3f}",
            f"{low[name]:.3f}",
            f"{statistics.median(res['first']):.3f}",
            ratio(name, "privframe"),
            ratio(name, "join_agg"),
            ratio(name, "join"),
            ratio(name, "truncated"),
            f"{res['peak_kib'] / 1024:,.0f}",
            _sigma(res, "count"),
            _sigma(res, "sum"),
        ]
        print("| " + " | ".join(cells) + " |")
    print("# notes:")
    print(
        "#  seconds: one whole run on data already in memory (the private ones: session, "
        "truncation, join, bounding, aggregation, noise); each process makes one untimed "
        "warm-up run first ('first s', the median over processes); the local variants ran "
        f"in {args.rounds} rounds of fresh processes, taking turns, {args.repeat} timed runs "
        "each; ratios are of the medians (of the mins)"
    )
    spread = ", ".join(
        f"{LABELS[k]} {max(v['times']) / min(v['times']):.1f}" for k, v in ok.items()
    )
    print(f"#  slowest / fastest timed run: {spread}")
    cpus = os.cpu_count() or 1
    busiest = max((max(b[0], a[0]) for b, a in loads.values()), default=0.0)
    if busiest > cpus:
        print(
            f"#  NOISY: the 1-minute load average reached {busiest:.1f} on {cpus} CPUs during "
            "the run (other work on the machine); the mins are the better guide to speed"
        )
    print(
        "#  peak MiB: VmHWM of the variant's process plus its child processes (Spark JVM), "
        "interpreter, library and data included"
    )
    print(
        f"#  joined rows: plain join {rows['plain']:,}; after truncating each patient to "
        f"{left} visits and {right} prescriptions {rows['truncated']:,}; released total count: "
        + ", ".join(
            f"{LABELS[k]} {v['total_count']:,.0f}" for k, v in ok.items() if "total_count" in v
        )
    )
    if "privframe" in ok:
        print(f"#  privframe explain: {ok['privframe']['bound']}")
    for name, res in ok.items():
        start, end = loads.get(name, ((0, 0, 0), (0, 0, 0)))
        what = f" ({res['version']}; {res['noise']}): {res['split']};" if "version" in res else ":"
        print(f"#  {LABELS[name]}{what} load average {start[0]:.2f} before, {end[0]:.2f} after")
    if peers.INSTALL_SECONDS:
        done = ", ".join(f"{k} {v:.0f} s" for k, v in peers.INSTALL_SECONDS.items())
        print(f"#  first-use installs of peer virtualenvs: {done}")
    ratios: dict[str, float] = {}
    if "privframe" in ok:
        for floor in ("join_agg", "join", "truncated"):
            if floor in ok:
                ratios[f"privframe/{floor}"] = med["privframe"] / med[floor]
        if "tumult" in ok:
            ratios["tumult/privframe"] = med["tumult"] / med["privframe"]
    if ratios:
        print("#  ratios of the medians: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of each table")
    parser.add_argument("--patients", type=int, default=None, help="patients (rows/5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data")
    parser.add_argument("--left-rows", type=int, default=5, help="l: visits kept per patient")
    parser.add_argument(
        "--right-rows", type=int, default=5, help="r: prescriptions kept per patient"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of the local variants, taking turns"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed runs of a local variant per round"
    )
    parser.add_argument("--peer-repeat", type=int, default=3, help="timed runs of Tumult")
    peers.add_arguments(parser, tuple(PEER_VENV))
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "privframe-bench",
        help="where the two tables are cached as parquet",
    )
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per variant")
    parser.add_argument("--save", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    if args.patients is None:
        args.patients = max(1, args.rows // 5)
    wanted = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(wanted) - set(PEER_VENV))
    if unknown:
        parser.error(f"unknown peers {unknown}; known: {', '.join(PEER_VENV)}")
    if min(args.rows, args.patients, args.left_rows, args.right_rows) < 1:
        parser.error("--rows, --patients, --left-rows and --right-rows must be >= 1")
    if min(args.rounds, args.repeat, args.peer_repeat) < 1:
        parser.error("--rounds, --repeat and --peer-repeat must be >= 1")

    t0 = time.perf_counter()
    paths = write_tables(args.rows, args.patients, args.seed, args.data_dir)
    rows = joined_rows(paths, args.left_rows, args.right_rows)
    took = time.perf_counter() - t0
    print(f"# data: {', '.join(paths.values())} ({took:.1f} s)", file=sys.stderr)
    cfg = {
        "paths": paths,
        "keys": region_names(),
        "lower": LOWER,
        "upper": UPPER,
        "left_rows": args.left_rows,
        "right_rows": args.right_rows,
        "rho": RHO,
        "repeat": args.repeat,
        "bench_dir": str(BENCH_DIR),
    }
    results: dict[str, dict[str, Any]] = {}
    loads: dict[str, tuple] = {}
    # The local variants take turns, round after round, each round in fresh processes, so
    # that a burst of load from other work on the machine falls on all of them alike.
    schedule = [name for _ in range(args.rounds) for name in LOCAL] + wanted
    for name in schedule:
        print(f"# running {LABELS[name]} ...", file=sys.stderr, flush=True)
        t0, before = time.perf_counter(), os.getloadavg()
        result = run_variant(name, cfg, args)
        after = os.getloadavg()
        loads[name] = (loads[name][0], after) if name in loads else (before, after)
        if "error" in result:
            print(f"#   FAILED: {result['error']}", file=sys.stderr, flush=True)
        print(f"#   done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        results[name] = _merged(results.get(name), result)
    ratios = report(results, args, loads, rows)
    for name in wanted:
        if "error" in results[name]:
            print(
                f"# {LABELS[name]} did not run: {results[name]['error']}. The rows above "
                "without it still stand; only its ratio is missing."
            )
    if args.save:
        saved = {
            "date": dt.date.today().isoformat(),
            "machine": compare.machine(),
            "command": " ".join(["python", *sys.argv]),
            "args": vars(args),
            "joined_rows": rows,
            "results": results,
            "ratios_of_medians": ratios,
            "load_average": loads,
        }
        args.save.write_text(json.dumps(saved, default=str, indent=1))


if __name__ == "__main__":
    main()
