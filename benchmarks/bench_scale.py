"""Release time and peak memory from parquet files of 1M to 100M rows (polars streaming).

Writes the standard workload (user_id, region with 100 keys, amount lognormal,
age; N rows, N/10 users, skewed regions) to seeded parquet files in chunks, so
that generating 100M rows never holds them all in memory, then runs one
release per file, each in a fresh subprocess that reads the file itself
(``pf.Session(path, ...)``, which streams). The subprocess reports the
release's wall time and its peak resident memory (``VmHWM`` from
``/proc/self/status``: the whole process, Python and polars included).

The query is the issue's: per region count, sum and mean of ``amount``
clipped to [0, 1000], each user at most 3 regions and 10 rows per region,
public keys, ρ = 1. Time per million rows should stay flat if the release
scales linearly.

Each file below 1 B rows is released ``--repeat`` times (default 3, each in a
fresh process) and the fastest is reported: on a shared 2-core machine one
10 M release varied from 1.3 to 1.7 s between runs, too much for a single
run to anchor the ratios. 1 B rows run once.

Targets (issue 18): 100 M rows within 1.2 × the time per row of 10 M, peak
under 4 GiB; 1 B rows (about 15 GiB of parquet) within 1.5 ×, peak under
8 GiB. The "/ 10M rate" column is that ratio. Progress is turned off in the
release's process (``PRIVFRAME_PROGRESS=0``), so only the figures are printed.

Usage:
    python benchmarks/bench_scale.py [--rows 1000000,10000000,100000000] [--dir DIR]
    python benchmarks/bench_scale.py --rows 10000000,1000000000 --dir DIR  # 1 B: ~16 GiB
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

REGIONS = [f"region_{i:03d}" for i in range(100)]
CHUNK = 5_000_000


def write_workload(path: Path, rows: int, seed: int = 0) -> None:
    """The seeded workload as parquet, written chunk by chunk (numpy's generator: data only)."""
    rng = np.random.default_rng(seed)
    users = max(1, rows // 10)
    # Skewed regions: Zipf-like popularity over the 100 keys.
    weights = 1.0 / np.arange(1, len(REGIONS) + 1) ** 1.1
    weights /= weights.sum()
    names = np.array(REGIONS)
    writer = None
    try:
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            table = pa.table(
                {
                    "user_id": rng.integers(0, users, n),
                    "region": names[rng.choice(len(REGIONS), n, p=weights)],
                    "amount": rng.lognormal(3.0, 1.5, n),
                    "age": rng.integers(10, 90, n),
                }
            )
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


_RUN = """
import json, re, time, warnings
import privframe as pf
path, regions = {path!r}, {regions!r}
start = time.perf_counter()
sess = pf.Session(path, privacy_unit="user_id", budget=pf.zCDP(rho=1.0))
result = (
    sess.query()
    .bound(max_groups=3, max_rows_per_group=10)
    .group_by("region", keys=regions)
    .agg(pf.count(), pf.sum("amount", (0, 1000)), pf.mean("amount", (0, 1000)))
    .release(rho=1.0)
)
seconds = time.perf_counter() - start
status = open("/proc/self/status").read()
peak_kib = int(re.search(r"VmHWM:\\s+(\\d+)", status).group(1))
print(json.dumps({{"seconds": seconds, "peak_mib": peak_kib / 1024, "groups": result.height}}))
"""


def run_release(path: Path) -> dict[str, float]:
    """One release from the file, in a fresh interpreter."""
    code = _RUN.format(path=str(path), regions=REGIONS)
    env = {**os.environ, "PRIVFRAME_PROGRESS": "0"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        timeout=7200,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,10000000,100000000")
    parser.add_argument("--dir", default=None, help="where to keep the parquet files")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="releases per file below 1 B rows, fastest reported (1 B rows: one release)",
    )
    args = parser.parse_args()
    sizes = [int(x) for x in args.rows.split(",")]
    directory = Path(args.dir or tempfile.mkdtemp(prefix="privframe-scale-"))
    directory.mkdir(parents=True, exist_ok=True)
    print(
        f"# {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"polars {pl.__version__}; files in {directory}"
    )
    print(
        f"{'rows':>12} {'file MiB':>9} {'write s':>8} {'release s':>10} {'s / 1M rows':>12} "
        f"{'/ 10M rate':>11} {'peak MiB':>9}"
    )
    rates: dict[int, float] = {}
    for rows in sizes:
        path = directory / f"workload_{rows}.parquet"
        written = 0.0
        if not path.exists():
            start = time.perf_counter()
            write_workload(path, rows)
            written = time.perf_counter() - start
        runs = [run_release(path) for _ in range(args.repeat if rows < 10**9 else 1)]
        got = min(runs, key=lambda r: r["seconds"])
        size = path.stat().st_size / 2**20
        rates[rows] = got["seconds"] / (rows / 1e6)
        # The issue's flatness targets compare each size's time per row with 10 M rows'.
        relative = f"{rates[rows] / rates[10**7]:.2f}" if 10**7 in rates else "-"
        print(
            f"{rows:>12,} {size:>9.0f} {written:>8.1f} {got['seconds']:>10.2f} "
            f"{rates[rows]:>12.3f} {relative:>11} {got['peak_mib']:>9.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
