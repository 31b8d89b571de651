"""Time a privframe release of the README query against plain-polars floors.

The workload is synthetic and seeded: ``--rows`` rows (default 10 million),
``--users`` privacy units (default rows/10) with lognormal activity, 100
regions with Zipf-like popularity (each user mostly in a home region),
``amount`` lognormal and ``age`` uniform on 10..89. Nothing is written to
disk. Data generation uses ``numpy.random.Generator``: that is fine for
*data*; privframe itself never uses numpy's generator for noise.

Three variants run the README query shape (filter ``age >= 18``; per region,
over the 100 public keys: count, sum and mean of ``amount`` clipped to
[0, 1000]):

* ``privframe``: a fresh ``Session`` per run, ``bound(max_groups=3,
  max_rows_per_group=5)``, ``release(rho=1.0)``.
* ``bounded polars``: the non-private floor, the same filter and the same
  bounding in plain polars (drop non-public keys; per (user, region) row
  count and clipped sum; keep each user's 3 regions whose seeded hash ranks
  lowest; weight min(n, 5); sum scaled by w/n; group by region; order by the
  keys), with no noise, no grid and no privframe.
* ``plain polars``: the same filter and a plain ``group_by`` of count, sum
  and mean of the clipped amount: no bounding.

Timing runs in one subprocess that regenerates the seeded data and then
interleaves the variants (privframe, bounded, plain; ``--repeat`` rounds), so
that a change in machine load hits all three alike; the table shows min,
median and max seconds and the ratios of the min times to the bounded floor
and to plain polars. Peak memory is measured separately: each variant runs
once in its own subprocess, which regenerates the data, resets the kernel's
peak-RSS mark (``/proc/self/clear_refs``) and reads it back after the run
(``VmHWM``), next to ``ru_maxrss`` (which also covers data generation). A
phase breakdown of one extra privframe release (session, planning, engine,
noise) follows; it reaches into privframe internals, which may change.

Usage:
    python benchmarks/bench_release.py [--rows 10000000] [--repeat 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

N_REGIONS = 100
LOWER, UPPER = 0.0, 1000.0
MAX_GROUPS, MAX_ROWS_PER_GROUP = 3, 5
RHO = 1.0
VARIANTS = ("privframe", "bounded_polars", "plain_polars")
LABELS = {
    "privframe": "privframe release",
    "bounded_polars": "bounded polars (floor)",
    "plain_polars": "plain polars group_by",
}


# -- data ---------------------------------------------------------------------------------


def region_names() -> list[str]:
    return [f"region_{i:02d}" for i in range(N_REGIONS)]


def make_data(rows: int, users: int, seed: int) -> pl.DataFrame:
    """The seeded synthetic table: user_id, region, amount, age."""
    rng = np.random.default_rng(seed)
    activity = rng.lognormal(0.0, 1.0, users)
    user_id = rng.choice(users, size=rows, p=activity / activity.sum())
    popularity = 1.0 / np.arange(1, N_REGIONS + 1) ** 1.1
    popularity /= popularity.sum()
    home = rng.choice(N_REGIONS, size=users, p=popularity)
    elsewhere = rng.choice(N_REGIONS, size=rows, p=popularity)
    region = np.where(rng.random(rows) < 0.7, home[user_id], elsewhere)
    del home, elsewhere
    frame = pl.DataFrame(
        {
            "user_id": user_id.astype(np.int64),
            "region": pl.Series(region_names()).gather(region.astype(np.uint32)),
            "amount": rng.lognormal(3.5, 1.2, rows),
            "age": rng.integers(10, 90, rows, dtype=np.int64),
        }
    )
    del user_id, region
    return frame


# -- the three variants -------------------------------------------------------------------


def readme_query(sess: Any, keys: list[str]) -> Any:
    import privframe as pf

    return (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=MAX_GROUPS, max_rows_per_group=MAX_ROWS_PER_GROUP)
        .group_by("region", keys=keys)
        .agg(
            pf.count(),
            pf.sum("amount", bounds=(LOWER, UPPER)),
            pf.mean("amount", bounds=(LOWER, UPPER)).alias("avg_amount"),
        )
    )


def run_privframe(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    import privframe as pf

    sess = pf.Session(df, privacy_unit="user_id", budget=pf.zCDP(rho=RHO))
    return readme_query(sess, keys).release(rho=RHO)


def _filter_age(lf: pl.LazyFrame, min_age: int | None) -> pl.LazyFrame:
    # None means no filter: compare.py's query has none.
    return lf if min_age is None else lf.filter(pl.col("age") >= min_age)


def run_bounded_polars(
    df: pl.DataFrame,
    keys: list[str],
    seed: int = 12345,
    *,
    max_groups: int = MAX_GROUPS,
    max_rows_per_group: int = MAX_ROWS_PER_GROUP,
    min_age: int | None = 18,
) -> pl.DataFrame:
    """The same filter and bounding as privframe's engine, in plain polars, no noise.

    The keyword arguments let ``compare.py`` run its own query shape (no
    filter, other limits) through this one floor instead of a copy of it.
    """
    key_frame = pl.DataFrame({"region": keys})
    clipped = pl.col("amount").clip(LOWER, UPPER)
    partial = (
        _filter_age(df.lazy(), min_age)
        .join(key_frame.lazy(), on="region", how="semi")
        .group_by("user_id", "region")
        .agg(pl.len().alias("n"), clipped.sum().alias("s"))
    )
    rank = pl.struct("user_id", "region").hash(seed).rank("ordinal").over("user_id")
    w = pl.min_horizontal(pl.col("n"), pl.lit(max_rows_per_group, pl.UInt32))
    per_region = (
        partial.filter(rank <= max_groups)
        .with_columns(w.alias("w"))
        .with_columns((pl.col("s") * pl.col("w") / pl.col("n")).alias("s"))
        .group_by("region")
        .agg(pl.col("w").sum().alias("count"), pl.col("s").sum().alias("amount_sum"))
        .collect()
    )
    return key_frame.join(per_region, on="region", how="left", maintain_order="left").with_columns(
        (pl.col("amount_sum") / pl.col("count")).alias("avg_amount")
    )


def run_cell_polars(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """The floor of exact bounding: one plain ``group_by`` of each row's (user, region) cell.

    The cell is packed into one integer (user · 2^b + region's position),
    the cheapest key polars groups; per cell the row count and the clipped
    sum, with no choice of groups, no weights, no noise.
    """
    position = pl.col("region").cast(pl.Enum(keys), strict=False).to_physical()
    cell = pl.col("user_id") * (1 << len(keys).bit_length()) + position.cast(pl.Int64)
    return (
        df.lazy()
        .filter(position.is_not_null())
        .group_by(cell.alias("cell"))
        .agg(pl.len().alias("n"), pl.col("amount").clip(LOWER, UPPER).sum().alias("s"))
        .collect()
    )


def run_plain_polars(
    df: pl.DataFrame, keys: list[str], *, min_age: int | None = 18
) -> pl.DataFrame:
    clipped = pl.col("amount").clip(LOWER, UPPER)
    return (
        _filter_age(df.lazy(), min_age)
        .group_by("region")
        .agg(pl.len().alias("count"), clipped.sum().alias("amount_sum"), clipped.mean())
        .collect()
    )


RUNNERS: dict[str, Callable[[pl.DataFrame, list[str]], pl.DataFrame]] = {
    "privframe": run_privframe,
    "bounded_polars": run_bounded_polars,
    "plain_polars": run_plain_polars,
}


def privframe_phases(df: pl.DataFrame, keys: list[str]) -> dict[str, float]:
    """Seconds per phase of one release, through privframe internals (profiling only)."""
    import privframe as pf
    from privframe.mechanisms.noise import discrete_gaussian
    from privframe.plan.planner import plan_release

    phases: dict[str, float] = {}
    t0 = time.perf_counter()
    sess = pf.Session(df, privacy_unit="user_id", budget=pf.zCDP(rho=RHO))
    query = readme_query(sess, keys)
    t1 = time.perf_counter()
    release = plan_release(query.plan, True, RHO)
    spec = sess._pipeline.spec(query.plan, release, sess.check(query.plan))
    t2 = time.perf_counter()
    exact = sess._engine.aggregate(spec)
    t3 = time.perf_counter()
    for m in release.measurements:
        discrete_gaussian(m.sigma_units, exact.height)
    t4 = time.perf_counter()
    phases["session + query"] = t1 - t0
    phases["plan + spec"] = t2 - t1
    phases["engine (exact bounded aggregates)"] = t3 - t2
    phases["noise (3 measurements x keys)"] = t4 - t3
    return phases


# -- measuring one variant (in a child process) ------------------------------------------


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            match = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS (Linux only)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def measure_memory(variant: str, rows: int, users: int, seed: int) -> dict[str, Any]:
    """Peak resident memory of one run of ``variant`` (this process runs nothing else)."""
    df = make_data(rows, users, seed)
    keys = region_names()
    gc.collect()
    reset = _reset_peak_rss()
    data_kib = _status_kib("VmRSS")
    out = RUNNERS[variant](df, keys)
    assert out.height == len(keys) or variant == "plain_polars", out.height
    return {
        "data_kib": data_kib,
        "peak_kib": _status_kib("VmHWM") if reset else None,
        # ru_maxrss is in KiB on Linux; it includes data generation.
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }


def measure_times(rows: int, users: int, seed: int, repeat: int) -> dict[str, Any]:
    """Seconds of every run, the variants interleaved so that load changes hit all alike."""
    df = make_data(rows, users, seed)
    keys = region_names()
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _ in range(repeat):
        for variant in VARIANTS:
            gc.collect()
            t0 = time.perf_counter()
            RUNNERS[variant](df, keys)
            times[variant].append(time.perf_counter() - t0)
    return {"times": times, "phases": privframe_phases(df, keys)}


def run_child(task: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        f"--only={task}",
        f"--rows={args.rows}",
        f"--users={args.users}",
        f"--seed={args.seed}",
        f"--repeat={args.repeat}",
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- report -------------------------------------------------------------------------------


def _mib(kib: int | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:,.0f}"


def report(
    timing: dict[str, Any], memory: dict[str, dict[str, Any]], args: argparse.Namespace
) -> None:
    times: dict[str, list[float]] = timing["times"]
    mins = {v: min(t) for v, t in times.items()}
    meds = {v: statistics.median(t) for v, t in times.items()}
    print(
        f"# privframe release vs plain polars: {args.rows:,} rows, {args.users:,} users, "
        f"{N_REGIONS} regions (seed {args.seed}), {args.repeat} runs each"
    )
    print(
        f"# {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"polars {pl.__version__}, numpy {np.__version__}"
    )
    header = (
        f"{'variant':<24} {'min s':>8} {'median s':>9} {'max s':>8} {'/bounded':>9} {'/plain':>8} "
        f"{'data MiB':>9} {'peak MiB':>9} {'maxrss MiB':>11}"
    )
    print(header)
    print("-" * len(header))
    for v in VARIANTS:
        r = memory[v]
        print(
            f"{LABELS[v]:<24} {mins[v]:>8.3f} {meds[v]:>9.3f} {max(times[v]):>8.3f} "
            f"{mins[v] / mins['bounded_polars']:>9.2f} {mins[v] / mins['plain_polars']:>8.2f} "
            f"{_mib(r['data_kib']):>9} {_mib(r['peak_kib']):>9} {_mib(r['maxrss_kib']):>11}"
        )
    ratio = mins["privframe"] / mins["bounded_polars"]
    print(
        f"# release / bounded floor = {ratio:.2f} (target <= 1.3: "
        f"{'met' if ratio <= 1.3 else 'MISSED'}); release / plain group_by = "
        f"{mins['privframe'] / mins['plain_polars']:.2f}; ratios use the min times"
    )
    print(
        "# data MiB: resident after generating the table; peak MiB: peak resident during "
        "one run of the variant in its own process (includes the data); maxrss MiB: that "
        "process's ru_maxrss, data generation included"
    )
    phases = timing.get("phases")
    if phases:
        total = sum(phases.values())
        print("# one extra privframe release, by phase:")
        for name, seconds in phases.items():
            print(f"#   {name:<36} {seconds:>8.3f} s  {100 * seconds / total:5.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--users", type=int, default=None, help="default: rows // 10")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data")
    parser.add_argument(
        "--only", choices=("timing", *(f"memory:{v}" for v in VARIANTS)), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.users is None:
        args.users = max(1, args.rows // 10)
    if args.rows < 1 or args.repeat < 1:
        parser.error("--rows and --repeat must be >= 1")
    if args.only == "timing":
        print(json.dumps(measure_times(args.rows, args.users, args.seed, args.repeat)))
        return
    if args.only:
        variant = args.only.split(":", 1)[1]
        print(json.dumps(measure_memory(variant, args.rows, args.users, args.seed)))
        return
    print("# timing (variants interleaved) ...", file=sys.stderr, flush=True)
    timing = run_child("timing", args)
    memory = {}
    for variant in VARIANTS:
        print(f"# peak memory of {LABELS[variant]} ...", file=sys.stderr, flush=True)
        memory[variant] = run_child(f"memory:{variant}", args)
    report(timing, memory, args)


if __name__ == "__main__":
    main()
