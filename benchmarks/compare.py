"""Compare privframe with peer DP libraries and non-private floors on one query.

The workload is ``bench_release.make_data`` (seeded): ``--rows`` rows,
rows/10 users with lognormal activity, 100 regions with Zipf-like
popularity, ``amount`` lognormal, ``age``. It is written once to a parquet
file in ``--data-dir`` and every variant reads that file into memory before
its timer starts.

The query, identical everywhere: per region over the 100 public keys, count,
sum and mean of ``amount`` clipped to [0, 1000]; each user keeps at most 3
regions and 10 rows per region; privacy unit ``user_id``; ρ = 1 zCDP (for
PipelineDP, which is (ε, δ)-DP only, the (ε, δ = 1e-6) that 1-zCDP implies).

Variants, each in its own subprocess (peers in their own virtualenvs, see
``peers.py``), each timing ``--repeat`` runs of its query and reporting its
peak memory and the per-group noise std it applies:

* ``privframe``: ``Session`` + ``bound`` + ``group_by(keys=...)`` + ``release``.
* ``bounded polars``: the same bounding in plain polars, no noise (the floor
  privframe is held to; ``bench_release.run_bounded_polars``).
* ``plain polars``: a plain ``group_by`` of the clipped amount, no bounding.
* ``opendp``: OpenDP's polars API (``dp.Context.compositor``, identifier
  truncation, ``with_keys`` for the public keys).
* ``pipelinedp``: PipelineDP's ``DPEngine`` on its ``LocalBackend``.
* ``tumult``: Tumult Analytics on Spark local (``Session``, ``RhoZCDPBudget``).

The report ends with issue 16's σ target, from privframe's ``explain`` alone:
on the issue's query and on this one, the released (count σ, sum σ) must lie
on the curve of the two-measurement split (count and centred sum), every ρ
must be spent, and privframe's mean σ must be no larger than any peer's.

Peak memory is the kernel's peak-RSS mark (``VmHWM``) of the subprocess plus
that of every process it started (Spark's JVM and Python workers), read after
the runs: it includes the interpreter, the library and the data in memory.

Usage:
    python benchmarks/compare.py --rows 1000000 --repeat 3 \\
        [--peers opendp,pipelinedp,tumult] [--skip-missing]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import bench_release as br  # noqa: E402  (a sibling script, not a package)
import peers  # noqa: E402

LOWER, UPPER = br.LOWER, br.UPPER
MAX_GROUPS, MAX_ROWS_PER_GROUP = 3, 10
RHO, DELTA = 1.0, 1e-6
LOCAL = ("privframe", "bounded_polars", "cell_polars", "plain_polars")
PEER_NAMES = ("opendp", "pipelinedp", "tumult")
SPARK = "privframe_spark"
LABELS = {
    "privframe": "privframe",
    SPARK: "privframe (Spark local)",
    "bounded_polars": "bounded polars (floor)",
    "cell_polars": "packed-cell group_by",
    "plain_polars": "plain polars group_by",
    "opendp": "OpenDP polars",
    "pipelinedp": "PipelineDP local",
    "tumult": "Tumult (Spark local)",
}

# -- code run inside every subprocess ------------------------------------------------------

# Shared by all snippets: the timer and the peak-memory reading. Kept free of
# third-party imports because it runs in every peer's interpreter.
PREAMBLE = r'''
import gc, json, math, os, re, resource, statistics, sys, time

CFG = json.loads(sys.argv[1])


def _hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.MULTILINE)
    except OSError:
        return 0
    return int(m.group(1)) if m else 0


def peak_kib():
    """VmHWM of this process plus all its descendants (Spark's JVM for Tumult)."""
    if not os.path.exists("/proc/self/status"):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += _hwm_kib(pid)
        todo.extend(children.get(pid, []))
    return total


def timed(fn):
    """Seconds of CFG["repeat"] runs of fn() and the last run's result."""
    times, out = [], None
    for _ in range(CFG["repeat"]):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out
'''

LOCAL_SNIPPET = r"""
sys.path.insert(0, CFG["bench_dir"])
import compare

result = compare.local_variant(CFG, timed)
result["peak_kib"] = peak_kib()
print(json.dumps(result))
"""

OPENDP_SNIPPET = r"""
import warnings

import opendp.prelude as dp
import polars as pl

warnings.simplefilter("ignore")  # FutureWarnings about defaults; the table is the output
dp.enable_features("contrib")
lf = pl.read_parquet(CFG["path"], columns=["user_id", "region", "amount"]).lazy()
keys = pl.DataFrame({"region": CFG["keys"]})
lo, hi = CFG["lower"], CFG["upper"]


def query():
    ctx = dp.Context.compositor(
        data=lf,
        # Rows are identified by user_id; truncation below bounds each user.
        privacy_unit=dp.unit_of(contributions=1, identifier="user_id"),
        privacy_loss=dp.loss_of(rho=CFG["rho"]),
        split_evenly_over=1,
        # Float sums need a public bound on the length (float rounding); the
        # table's row count is the tightest honest one.
        margins=[dp.polars.Margin(by=[], max_length=CFG["rows"])],
    )
    return (
        ctx.query()
        .truncate_per_group(CFG["max_rows_per_group"], by=["region"])
        # keep="first": keep="sample" fails in OpenDP 0.16 for a single grouping
        # column (duplicate struct field name); which groups are kept does not
        # change the privacy analysis or the cost.
        .truncate_num_groups(CFG["max_groups"], by=["region"], keep="first")
        .group_by("region")
        .agg(
            dp.len(signed=True).alias("count"),
            pl.col("amount").fill_null(0.0).dp.sum((lo, hi)).alias("amount_sum"),
            pl.col("amount").fill_null(0.0).dp.mean((lo, hi)).alias("amount_mean"),
        )
        .with_keys(keys)
    )


times, out = timed(lambda: query().release().collect())
assert out.height == len(CFG["keys"]), out.height
summary = query().summarize()
rows = {(r["column"], r["aggregate"]): r for r in summary.iter_rows(named=True)}
sigma = {
    "count": rows[("count", "Frame Length")]["scale"],
    "sum": rows[("amount_sum", "Sum")]["scale"],
    "mean_num": rows[("amount_mean", "Sum")]["scale"],
    "mean_den": rows[("amount_mean", "Length")]["scale"],
    "mean_centre": 0.0,
}
print(json.dumps({
    "version": "opendp " + dp.__version__ if hasattr(dp, "__version__") else "opendp",
    "times": times,
    "peak_kib": peak_kib(),
    "sigma": sigma,
    "noise": ", ".join(sorted(set(summary["distribution"].to_list()))),
    "how": "Query.summarize() scale (Gaussian σ); mean = noisy Sum / noisy Length",
}))
"""

PIPELINEDP_SNIPPET = r"""
import re

import pandas as pd
import pipeline_dp
from pipeline_dp import report_generator

df = pd.read_parquet(CFG["path"], columns=["user_id", "region", "amount"])
# The local backend consumes any iterable of rows; tuples are its cheapest form.
rows = list(zip(df["user_id"].tolist(), df["region"].tolist(), df["amount"].tolist()))
del df
extractors = pipeline_dp.DataExtractors(
    privacy_id_extractor=lambda r: r[0],
    partition_extractor=lambda r: r[1],
    value_extractor=lambda r: r[2],
)
params = pipeline_dp.AggregateParams(
    noise_kind=pipeline_dp.NoiseKind.GAUSSIAN,
    metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM, pipeline_dp.Metrics.MEAN],
    max_partitions_contributed=CFG["max_groups"],
    max_contributions_per_partition=CFG["max_rows_per_group"],
    min_value=CFG["lower"],
    max_value=CFG["upper"],
)
report = None


def query():
    global report
    accountant = pipeline_dp.NaiveBudgetAccountant(
        total_epsilon=CFG["epsilon"], total_delta=CFG["delta"]
    )
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    report = report_generator.ExplainComputationReport()
    result = engine.aggregate(
        rows, params, extractors, public_partitions=CFG["keys"],
        out_explain_computation_report=report,
    )
    accountant.compute_budgets()
    return list(result)


times, out = timed(query)
assert len(out) == len(CFG["keys"]), len(out)
text = report.text()
found = dict(re.findall(r"Applied to '(\w+)' Gaussian mechanism:\s+parameter=([0-9.e+-]+)", text))
count, nsum = float(found["count"]), float(found["normalized_sum"])
mid = (CFG["lower"] + CFG["upper"]) / 2
print(json.dumps({
    "version": "pipeline-dp " + getattr(pipeline_dp, "__version__", "?"),
    "times": times,
    "peak_kib": peak_kib(),
    "sigma": {
        "count": count,
        # SUM is derived from MEAN's two measurements: normalized_sum + mid * count.
        "sum": (nsum**2 + (mid * count) ** 2) ** 0.5,
        "mean_num": nsum,
        "mean_den": count,
        "mean_centre": mid,
    },
    "noise": "Gaussian (analytic, per (ε, δ) share)",
    "how": "ExplainComputationReport Gaussian parameter (σ); COUNT+SUM+MEAN share MEAN's "
    "count and normalized_sum, ε and δ split evenly between them (NaiveBudgetAccountant)",
}))
"""

TUMULT_SPARK = r"""
import logging
import tempfile
import warnings

os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's workers must import tmlt too
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
warnings.simplefilter("ignore")
from pyspark.sql import SparkSession

cpus = os.cpu_count() or 1
spark = (
    SparkSession.builder.master(f"local[{cpus}]")
    .config("spark.driver.memory", "12g")
    .config("spark.ui.enabled", "false")
    # Otherwise Spark leaves a spark-warehouse/ folder in the working directory.
    .config("spark.sql.warehouse.dir", os.path.join(tempfile.gettempdir(), "privframe-bench-spark"))
    # Spark's default of 200 shuffle partitions is tuned for clusters; a local
    # run of 100 groups is fastest with a few per core.
    .config("spark.sql.shuffle.partitions", str(4 * cpus))
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
logging.getLogger("py4j").setLevel(logging.ERROR)
"""
"""Start a local Spark for Tumult in its virtualenv: the part of a Tumult snippet before
its query (shared with bench_pure_dp.py)."""

TUMULT_SNIPPET = (
    TUMULT_SPARK
    + r"""import tmlt.analytics
from tmlt.analytics import (
    AddRowsWithID, KeySet, MaxGroupsPerID, MaxRowsPerGroupPerID, QueryBuilder, RhoZCDPBudget,
    Session,
)

data = spark.read.parquet(CFG["path"]).select("user_id", "region", "amount").cache()
data.count()  # into memory before the timer, like every other variant
keys = KeySet.from_dict({"region": CFG["keys"]})
lo, hi = CFG["lower"], CFG["upper"]
grouped = (
    QueryBuilder("data")
    .enforce(MaxGroupsPerID("region", CFG["max_groups"]))
    .enforce(MaxRowsPerGroupPerID("region", CFG["max_rows_per_group"]))
    .groupby(keys)
)
# Tumult has one aggregation per query: three queries, ρ split evenly.
queries = {
    "count": grouped.count(mechanism="gaussian"),
    "sum": grouped.sum("amount", lo, hi, mechanism="gaussian"),
    "mean": grouped.average("amount", lo, hi, mechanism="gaussian"),
}
share = RhoZCDPBudget(CFG["rho"] / len(queries))


def new_session():
    return Session.from_dataframe(
        privacy_budget=RhoZCDPBudget(CFG["rho"]), source_id="data", dataframe=data,
        protected_change=AddRowsWithID("user_id"),
    )


def query():
    sess = new_session()
    return [sess.evaluate(q, share).toPandas() for q in queries.values()]


def sigma_of(info):
    name, p = info["noise_mechanism"].name, float(info["noise_parameter"])
    # Tumult's Gaussian parameter is σ²; its Laplace/geometric parameter is the scale b.
    return math.sqrt(p) if "GAUSSIAN" in name else p * math.sqrt(2)


sess = new_session()
info = {k: sess._noise_info(q, share) for k, q in queries.items()}
times, out = timed(query)
assert all(len(o) == len(CFG["keys"]) for o in out), [len(o) for o in out]
mean_num, mean_den = (sigma_of(i) for i in info["mean"])

print(json.dumps({
    "version": "tmlt.analytics " + getattr(tmlt.analytics, "__version__", "?")
    + ", pyspark " + spark.version,
    "times": times,
    "peak_kib": peak_kib(),
    "sigma": {
        "count": sigma_of(info["count"][0]),
        "sum": sigma_of(info["sum"][0]),
        "mean_num": mean_num,
        "mean_den": mean_den,
        "mean_centre": (lo + hi) / 2,
    },
    "noise": ", ".join(sorted({i["noise_mechanism"].name for v in info.values() for i in v})),
    "how": "Session._noise_info (Gaussian σ² → σ); 3 queries at ρ/3; average = centred "
    "sum / count at ρ/6 each",
}))
"""
)

PEER_SNIPPETS = {
    "opendp": OPENDP_SNIPPET,
    "pipelinedp": PIPELINEDP_SNIPPET,
    "tumult": TUMULT_SNIPPET,
}


def privframe_query(sess: Any, bound: dict[str, int], keys: list[str]) -> Any:
    """The benchmark's query on a privframe session, under the contribution bound ``bound``."""
    import privframe as pf

    bounds = (LOWER, UPPER)
    return (
        sess.query()
        .bound(**bound)
        .group_by("region", keys=keys)
        .agg(pf.count(), pf.sum("amount", bounds=bounds), pf.mean("amount", bounds=bounds))
    )


def privframe_sigma(explanation: Any) -> dict[str, float]:
    """The σ columns from privframe's ``explain``: count, sum and the mean's parts.

    The sum is post-processed, centred sum + c·count, so its std is
    sqrt(σ_C² + c²·σ_N²); the mean is c + centred sum / count. The sum's std is
    computed from the two measurements at full precision and checked against
    the std that ``explain`` states for the sum's output row.
    """
    by_kind = {m.kind: m for m in explanation.measurements}
    count, centred = by_kind["count"], by_kind["centred_sum"]
    centre = centred.midpoint
    sum_std = math.hypot(centred.sigma, centre * count.sigma)
    stated = next(r["std"] for r in explanation.rows if r["output"] == "amount_sum")
    assert math.isclose(float(stated), sum_std, rel_tol=1e-5), (stated, sum_std)
    return {
        "count": count.sigma,
        "sum": sum_std,
        "mean_num": centred.sigma,
        "mean_den": count.sigma,  # the mean reads the same count measurement
        "mean_centre": centre,
    }


def local_variant(cfg: dict[str, Any], timed: Any) -> dict[str, Any]:
    """Run privframe or a floor in this (privframe's) interpreter; called by LOCAL_SNIPPET."""
    keys = cfg["keys"]
    variant = cfg["variant"]
    result: dict[str, Any] = {"version": f"polars {pl.__version__}", "sigma": None}
    if variant == SPARK:
        return _spark_variant(cfg, timed, result)
    df = pl.read_parquet(cfg["path"])
    if variant == "privframe":
        return _privframe_variant(cfg, timed, df, result)
    if variant == "bounded_polars":
        times, out = timed(
            lambda: br.run_bounded_polars(
                df,
                keys,
                max_groups=cfg["max_groups"],
                max_rows_per_group=cfg["max_rows_per_group"],
                min_age=None,
            )
        )
        # The exact bounded per-group values give the typical group for the mean's std.
        counts = out["count"].fill_null(0)
        result["typical_count"] = float(counts.median())
        result["bounded_mean"] = float(out["amount_sum"].sum() / counts.sum())
    elif variant == "cell_polars":
        times, out = timed(lambda: br.run_cell_polars(df, keys))
    else:
        times, out = timed(lambda: br.run_plain_polars(df, keys, min_age=None))
    assert out.height == len(keys) or (variant == "cell_polars" and out.height), out.height
    result["times"] = times
    return result


def _bench_bound(cfg: dict[str, Any]) -> dict[str, int]:
    return {"max_groups": cfg["max_groups"], "max_rows_per_group": cfg["max_rows_per_group"]}


def _privframe_variant(
    cfg: dict[str, Any], timed: Any, df: pl.DataFrame, result: dict[str, Any]
) -> dict[str, Any]:
    """privframe's release of the query, timed, and the σ its ``explain`` states."""
    import privframe as pf

    def query() -> Any:
        sess = pf.Session(df, privacy_unit="user_id", budget=pf.zCDP(cfg["rho"]))
        return privframe_query(sess, _bench_bound(cfg), cfg["keys"])

    times, out = timed(lambda: query().release(rho=cfg["rho"]))
    assert out.height == len(cfg["keys"]), out.height
    result.update(
        times=times,
        version=f"privframe {importlib.metadata.version('privframe')}",
        sigma=privframe_sigma(query().explain(rho=cfg["rho"])),
        noise="discrete Gaussian",
        how="explain(rho=1): count and centred sum measured once each; "
        "sum = centred sum + 500·count, mean = 500 + centred sum / count",
    )
    return result


def _spark_variant(cfg: dict[str, Any], timed: Any, result: dict[str, Any]) -> dict[str, Any]:
    """privframe's Spark engine on Spark local[2], next to Tumult's row.

    The data is read and cached by Spark before timing, as for Tumult; each
    timed run is a whole release (Session, bounding on Spark, noise).
    """
    from pyspark.sql import SparkSession

    import privframe as pf

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="privframe-spark-"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.read.parquet(cfg["path"]).cache()
    frame.count()

    def run() -> Any:
        sess = pf.Session(frame, privacy_unit="user_id", budget=pf.zCDP(cfg["rho"]))
        return privframe_query(sess, _bench_bound(cfg), cfg["keys"]).release(rho=cfg["rho"])

    times, out = timed(run)
    assert len(out) == len(cfg["keys"])
    result.update(times=times, version=f"pyspark {spark.version}")
    spark.stop()
    return result


# -- the σ target of issue 16 -------------------------------------------------------------

# (label, contribution bound, L2 sensitivity of the per-group count vector, as a formula):
# the query, where a user's <= 10 rows may all fall in one group, and the
# benchmark's, where a user adds <= 10 rows to each of <= 3 groups: Δ = sqrt(3·10²).
CURVE_QUERIES = (
    ("issue query", {"max_rows": 10, "max_groups": 3}, 10.0, "10"),
    ("benchmark query", {"max_groups": 3, "max_rows_per_group": 10}, math.sqrt(300), "√300"),
)


def curve_check(bound: dict[str, int], delta: float, keys: list[str]) -> dict[str, Any]:
    """Where privframe's (count σ, sum σ) lies against the two-measurement curve at ρ.

    With ρ_c + ρ_s = ρ between the count (L2 sensitivity Δ) and the centred sum
    (Δ·h, h = (U − L)/2, centre c), count σ = Δ/√(2ρ_c) and the sum read as
    centred sum + c·count has σ = √((Δh)²/(2ρ_s) + c²·count σ²). From the
    released count σ this gives ρ_c, hence the curve's sum σ; the released sum σ
    must not exceed it, and the measurements' exact ρ must add up to ρ.
    Public parameters only: the session holds an empty table.
    """
    import privframe as pf

    schema = {"user_id": pl.Int64, "region": pl.String, "amount": pl.Float64}
    sess = pf.Session(pl.DataFrame(schema=schema), privacy_unit="user_id", budget=pf.zCDP(RHO))
    explanation = privframe_query(sess, bound, keys).explain(rho=RHO)
    sigma = privframe_sigma(explanation)
    centre, half = (LOWER + UPPER) / 2, (UPPER - LOWER) / 2
    rho_c = delta**2 / (2 * sigma["count"] ** 2)
    curve = math.sqrt((delta * half) ** 2 / (2 * (RHO - rho_c)) + (centre * sigma["count"]) ** 2)
    return {
        "count": sigma["count"],
        "sum": sigma["sum"],
        "rho": {m.kind: float(m.exact_share) for m in explanation.measurements},
        "curve_sum": curve,
        "on_curve": sigma["sum"] <= curve * (1 + 1e-9),
        "spent_all": sum(m.exact_share for m in explanation.measurements) == RHO,
    }


def curve_lines(keys: list[str]) -> list[str]:
    """The target check of issue 16, one line per query, for the report's notes."""
    lines = [
        f"#  σ target (issue 16): count σ = Δ/√(2ρ_c), sum σ = √((Δ·{(UPPER - LOWER) / 2:g})²/"
        f"(2ρ_s) + {(LOWER + UPPER) / 2:g}²·count σ²), ρ_c + ρ_s = {RHO:g}"
    ]
    for label, bound, delta, delta_text in CURVE_QUERIES:
        c = curve_check(bound, delta, keys)
        args = ", ".join(f"{k}={v}" for k, v in bound.items())
        split = ", ".join(f"{k} {v:.4f}" for k, v in c["rho"].items())
        lines.append(
            f"#   {label} bound({args}), Δ = {delta_text}: (count σ, sum σ) = "
            f"({c['count']:,.2f}, {c['sum']:,.1f}) at ρ {split}; curve sum σ at that count σ "
            f"{c['curve_sum']:,.1f} (released − curve = {c['sum'] - c['curve_sum']:+.1e}): "
            f"{'on the curve' if c['on_curve'] else 'ABOVE the curve'}; "
            f"Σ measurement ρ == {RHO:g}: {c['spent_all']} "
            f"({'no ρ wasted' if c['spent_all'] else 'ρ wasted'})"
        )
    return lines


# -- driver ------------------------------------------------------------------------------


def write_data(rows: int, seed: int, data_dir: Path) -> Path:
    """The seeded workload as parquet, written once per (rows, seed) and reused."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"workload_{rows}_{seed}.parquet"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        br.make_data(rows, max(1, rows // 10), seed).write_parquet(tmp)
        tmp.replace(path)  # atomic: a killed run never leaves half a file under the real name
    return path


def run_variant(name: str, cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """One variant's result dict, or {"error": reason} when it cannot run."""
    cfg = {**cfg, "variant": name}
    try:
        if name in (*LOCAL, SPARK):
            return peers.run_python(
                sys.executable, PREAMBLE + LOCAL_SNIPPET, [json.dumps(cfg)], args.timeout
            )
        if args.skip_missing and not peers.is_installed(name):
            return {"error": "not installed; run without --skip-missing to install"}
        return peers.run_snippet(
            name, PREAMBLE + PEER_SNIPPETS[name], [json.dumps(cfg)], args.timeout
        )
    except peers.PeerError as exc:
        return {"error": str(exc)}


def mean_sigma(sigma: dict[str, float], n: float, mu: float) -> float:
    """Std of a noisy ratio (centre + S/N) at count n and true mean mu (delta method).

    Var ≈ (σ_S² + (mu − centre)² σ_N²) / n²: each library's mean is a noisy
    numerator over a noisy count, centred or not.
    """
    shift = mu - sigma["mean_centre"]
    return math.sqrt(sigma["mean_num"] ** 2 + (shift * sigma["mean_den"]) ** 2) / n


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        mem = f", {pages / 2**30:.0f} GiB RAM"
    except (ValueError, OSError):
        pass
    return (
        f"{cpu}, {os.cpu_count()} CPUs{mem}; Python {platform.python_version()}, "
        f"polars {pl.__version__}"
    )


def fmt_sigma(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.1f}" if x < 1e6 else f"{x:.3g}"


def _table(results: dict[str, dict[str, Any]], n_ref: float | None, mu: float | None) -> None:
    """The markdown table: one row per variant, ``n/a (reason)`` for one that failed."""
    mins = {k: min(r["times"]) for k, r in results.items() if "error" not in r}
    mean_head = f"mean σ @n={n_ref:,.0f}" if n_ref else "mean σ"
    header = (
        f"| {'variant':<22} | {'min s':>8} | {'median s':>8} | {'/privframe':>10} | "
        f"{'/bounded':>8} | {'/plain':>8} | {'peak MiB':>8} | {'count σ':>8} | "
        f"{'sum σ':>9} | {mean_head:>14} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c) - 1) + ":" for c in header.split("|")[1:-1]) + "|")
    for name, r in results.items():
        label = LABELS[name]
        if "error" in r:
            print(f"| {label:<22} | n/a ({r['error']}) |")
            continue
        t = mins[name]

        def ratio(other: str, t: float = t) -> str:
            return f"{t / mins[other]:.2f}" if other in mins else "n/a"

        s = r.get("sigma")
        print(
            f"| {label:<22} | {t:>8.3f} | {statistics.median(r['times']):>8.3f} | "
            f"{ratio('privframe'):>10} | {ratio('bounded_polars'):>8} | "
            f"{ratio('plain_polars'):>8} | {r['peak_kib'] / 1024:>8,.0f} | "
            f"{fmt_sigma(s and s['count']):>8} | {fmt_sigma(s and s['sum']):>9} | "
            f"{fmt_sigma(r.get('mean_sigma')):>14} |"
        )


def _mean_target(results: dict[str, dict[str, Any]]) -> str | None:
    """Issue 16's mean target: privframe's mean σ no larger than any peer's in this run."""
    own = results.get("privframe", {}).get("mean_sigma")
    peer = {k: r["mean_sigma"] for k, r in results.items() if k in PEER_NAMES and "mean_sigma" in r}
    if own is None or not peer:
        return None
    best = min(peer, key=peer.__getitem__)
    verdict = "met" if own <= peer[best] else "MISSED"
    return (
        f"#  mean σ target (issue 16): privframe {own:.2f} against the lowest peer's "
        f"{peer[best]:.2f} ({LABELS[best]}; peers run: {len(peer)}): {verdict}"
    )


def _speed_target(results: dict[str, dict[str, Any]]) -> str | None:
    """Issue 35's speed target: a release within 4 x a plain polars group_by (min times)."""
    own = results.get("privframe", {}).get("times")
    plain = results.get("plain_polars", {}).get("times")
    if not own or not plain:
        return None
    ratio = min(own) / min(plain)
    verdict = "met" if ratio <= 4 else "MISSED"
    cells = results.get("cell_polars", {}).get("times")
    floor = f"; packed-cell group_by / plain = {min(cells) / min(plain):.1f}" if cells else ""
    return (
        f"#  speed target (issue 35): release / plain group_by = {ratio:.1f} (<= 4): {verdict}"
        f"{floor}"
    )


def report(
    results: dict[str, dict[str, Any]], args: argparse.Namespace, eps: float, target: list[str]
) -> None:
    """Print the header, the table and the notes (``target``: the σ curve check's lines)."""
    floor = results.get("bounded_polars", {})
    n_ref, mu = floor.get("typical_count"), floor.get("bounded_mean")
    for r in results.values():
        if r.get("sigma") and n_ref and mu is not None:
            r["mean_sigma"] = mean_sigma(r["sigma"], n_ref, mu)
    print(
        f"# privframe vs peers: {args.rows:,} rows, {args.rows // 10:,} users, "
        f"{br.N_REGIONS} public regions (seed {args.seed}); {args.repeat} runs each"
    )
    print(f"# {dt.date.today().isoformat()}; {machine()}")
    print(
        f"# query: per region count, sum, mean of amount in [{LOWER:g}, {UPPER:g}]; "
        f"<= {MAX_GROUPS} regions and <= {MAX_ROWS_PER_GROUP} rows per region per user; "
        f"rho = {RHO:g}"
    )
    _table(results, n_ref, mu)
    print("# notes:")
    print(
        "#  seconds: one query (session/context + bounding + aggregation + noise) on data "
        "already in memory; ratios use min times"
    )
    print(
        "#  peak MiB: VmHWM of the variant's process plus its child processes (Spark JVM), "
        "interpreter, library and data included"
    )
    if n_ref:
        print(
            f"#  mean σ: sqrt(σ_num² + ((μ − c)·σ_count)²) / n at the median group's bounded "
            f"count n = {n_ref:,.0f} and the bounded mean μ = {mu:.1f} (c = centre of the "
            "numerator, 0 if uncentred)"
        )
    print(
        f"#  PipelineDP is (ε, δ)-DP: it gets ε = {eps:.4f}, δ = {DELTA:g}, the (ε, δ) "
        f"that ρ = {RHO:g} zCDP implies (privframe zCDP({RHO:g}).epsilon({DELTA:g}))"
    )
    for name, r in results.items():
        if r.get("how"):
            print(f"#  {LABELS[name]} ({r['version']}; {r['noise']}): {r['how']}")
    if peers.INSTALL_SECONDS:
        done = ", ".join(f"{k} {v:.0f} s" for k, v in peers.INSTALL_SECONDS.items())
        print(f"#  first-use installs of peer virtualenvs: {done}")
    for line in [*target, _mean_target(results), _speed_target(results)]:
        if line:
            print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data")
    peers.add_arguments(parser, PEER_NAMES)
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "privframe-bench",
        help="where the workload parquet is cached",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per variant")
    parser.add_argument(
        "--spark",
        action="store_true",
        help="also run privframe's Spark engine (needs pip install -e '.[spark]' and Java 17)",
    )
    args = parser.parse_args()
    wanted = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(wanted) - set(PEER_NAMES))
    if unknown:
        parser.error(f"unknown peers {unknown}; known: {', '.join(PEER_NAMES)}")
    if args.rows < 1 or args.repeat < 1:
        parser.error("--rows and --repeat must be >= 1")

    import privframe as pf

    eps = pf.zCDP(RHO).epsilon(DELTA)
    t0 = time.perf_counter()
    path = write_data(args.rows, args.seed, args.data_dir)
    print(f"# data: {path} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    cfg = {
        "path": str(path),
        "rows": args.rows,
        "repeat": args.repeat,
        "keys": br.region_names(),
        "lower": LOWER,
        "upper": UPPER,
        "max_groups": MAX_GROUPS,
        "max_rows_per_group": MAX_ROWS_PER_GROUP,
        "rho": RHO,
        "epsilon": eps,
        "delta": DELTA,
        "bench_dir": str(BENCH_DIR),
    }
    results: dict[str, dict[str, Any]] = {}
    for name in (*LOCAL, *([SPARK] if args.spark else []), *wanted):
        print(f"# running {LABELS[name]} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        results[name] = run_variant(name, cfg, args)
        print(f"#   done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    report(results, args, eps, curve_lines(cfg["keys"]))


if __name__ == "__main__":
    main()
