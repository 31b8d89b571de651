"""A privframe release on Spark against a plain Spark ``groupBy`` of the same cached rows.

The README's standard query (``compare.privframe_query``): per region over the
100 public keys, count, sum and mean of ``amount`` clipped to [0, 1000], each
user keeping at most 3 regions and 10 rows in each
(``bound(max_groups=3, max_rows_per_group=10)``), privacy unit ``user_id``,
ρ = 1 zCDP. The workload is ``bench_release.make_data``'s seeded table,
written once as parquet (``compare.write_data``), read by Spark and cached
before any timer starts.

Two variants take turns in one process, so that load from other work on a
shared machine falls on both alike:

* ``release``: ``Session(frame, "user_id", zCDP(1))``, the query and
  ``release(rho=1)``: planning, bounding and aggregation on Spark, noise on
  the driver;
* ``plain``: ``frame.groupBy("region").agg(count, sum, avg)`` of the clipped
  ``amount``, collected: no bounding, no noise.

Each is run once untimed, then ``--repeat`` times each, alternating; the
table gives the min and median seconds and the ratio release / plain of the
mins, with the load average (``os.getloadavg``) before and after the runs.

Modes: ``local`` runs Spark ``local[2]`` in this process; ``cluster`` starts
a standalone master and two workers with the test suite's own launcher
(``tests/spark_services.py``: everything on the loopback, 512 MiB executors,
two one-core executors per application) and runs the driver here.

To compare two versions of privframe, point ``PYTHONPATH`` at each checkout:

    PYTHONPATH=. python benchmarks/bench_spark.py --rows 1000000 10000000
    PYTHONPATH=../main python benchmarks/bench_spark.py --rows 1000000 10000000
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent / "tests"))

import bench_release as br  # noqa: E402  (sibling scripts, not a package)
import compare  # noqa: E402

SHUFFLE_PARTITIONS = "8"
BOUND = {"max_groups": compare.MAX_GROUPS, "max_rows_per_group": compare.MAX_ROWS_PER_GROUP}


@contextmanager
def spark_session(mode: str) -> Iterator[Any]:
    """A Spark session on ``local[2]`` or on a standalone cluster started for the run."""
    from spark_services import Services, start_cluster
    from spark_setup import classic_session

    warehouse = tempfile.mkdtemp(prefix="privframe-bench-spark-")
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": SHUFFLE_PARTITIONS,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.warehouse.dir": warehouse,
    }
    if mode == "local":
        session = classic_session("local[2]", {**conf, "spark.driver.memory": "4g"})
        try:
            yield session
        finally:
            session.stop()
        return
    services = Services(Path(tempfile.mkdtemp(prefix="privframe-bench-cluster-")), os.environ)
    try:
        cluster = start_cluster(services)
        session = classic_session(cluster.master, {**cluster.conf, **conf})
        try:
            yield session
        finally:
            session.stop()
    finally:
        services.stop()


def timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure(spark: Any, path: Path, repeat: int) -> dict[str, list[float]]:
    """Seconds of each variant's runs, the variants alternating."""
    from pyspark.sql import functions as f

    import privframe as pf

    frame = spark.read.parquet(str(path)).select("user_id", "region", "amount").cache()
    frame.count()
    keys = br.region_names()
    clipped = f.least(f.greatest(f.col("amount"), f.lit(compare.LOWER)), f.lit(compare.UPPER))

    def release() -> None:
        sess = pf.Session(frame, privacy_unit="user_id", budget=pf.zCDP(compare.RHO))
        out = compare.privframe_query(sess, BOUND, keys).release(rho=compare.RHO)
        assert len(out) == len(keys)

    def plain() -> None:
        out = frame.groupBy("region").agg(f.count(f.lit(1)), f.sum(clipped), f.avg(clipped))
        assert len(out.collect()) == len(keys)

    variants = {"release": release, "plain": plain}
    for run in variants.values():  # untimed: JIT, broadcast of the keys, Python workers
        run()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeat):
        for name, run in variants.items():
            times[name].append(timed(run))
    frame.unpersist()
    return times


def privframe_version() -> str:
    """Where privframe was imported from, with the checkout's commit."""
    import privframe

    root = Path(privframe.__file__).resolve().parent.parent
    done = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return f"{root} at {done.stdout.strip() or '?'}"


def load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument(
        "--modes", nargs="+", choices=["local", "cluster"], default=["local", "cluster"]
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "privframe-bench"
    )
    args = parser.parse_args()
    paths = {rows: compare.write_data(rows, args.seed, args.data_dir) for rows in args.rows}
    print(f"# privframe on Spark: {dt.date.today()}, {platform.node()}, {os.cpu_count()} CPUs")
    print(f"# privframe: {privframe_version()}; {args.repeat} runs each, alternating")
    print(
        "| mode | rows | release min s | release median s | plain min s | plain median s "
        "| release / plain | load before | load after |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    for mode in args.modes:
        with spark_session(mode) as spark:
            for rows, path in paths.items():
                before = load()
                times = measure(spark, path, args.repeat)
                rel, plain = times["release"], times["plain"]
                print(
                    f"| {mode} | {rows:,} | {min(rel):.2f} | {statistics.median(rel):.2f} "
                    f"| {min(plain):.2f} | {statistics.median(plain):.2f} "
                    f"| {min(rel) / min(plain):.1f} | {before} | {load()} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
