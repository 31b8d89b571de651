"""A large public-key histogram: how much of a release is the noise step?

``--rows`` rows (default 10M) over ``--keys`` public keys (default 1M; each
row's key uniform), ``--rows``/10 users; per key count, sum and mean of an
``amount`` clipped to [0, 1000], each user at most 3 keys and 10 rows per key,
ρ = 1. Times one whole release, then its parts on the same plan: the exact
engine aggregation and the noise step as a release runs it (one discrete
Gaussian draw per measurement and key, measurements in parallel threads).
The issue's target: noise under 20% of the release.

Usage:
    python benchmarks/bench_many_keys.py [--rows 10000000] [--keys 1000000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

import privframe as pf
from privframe.mechanisms.draws import NoiseDraw, noise_vectors
from privframe.plan.planner import plan_release


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=1_000_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)  # data only; privframe's noise never uses it
    df = pl.DataFrame(
        {
            "user_id": rng.integers(0, max(1, args.rows // 10), args.rows),
            "cell": rng.integers(0, args.keys, args.rows),
            "amount": rng.lognormal(3.0, 1.5, args.rows),
        }
    )
    sess = pf.Session(df, "user_id", pf.zCDP(1e9))
    query = (
        sess.query()
        .bound(max_groups=3, max_rows_per_group=10)
        .group_by("cell", keys=list(range(args.keys)))
        .agg(pf.count(), pf.sum("amount", (0, 1000)), pf.mean("amount", (0, 1000)))
    )
    start = time.perf_counter()
    query.release(rho=1.0)
    release = time.perf_counter() - start
    plan = plan_release(query.plan, True, 1.0)
    start = time.perf_counter()
    exact = sess._engine.aggregate(sess._pipeline.spec(query.plan, plan, sess.check(query.plan)))
    engine = time.perf_counter() - start
    start = time.perf_counter()
    noise_vectors(
        [NoiseDraw(m.family, m.scale_units) for m in plan.measurements], exact.height, None
    )
    noise = time.perf_counter() - start
    print(
        f"{args.rows:,} rows, {args.keys:,} keys: release {release:.2f} s; engine "
        f"{engine:.2f} s; noise {noise:.2f} s = {noise / release:.0%} of the release "
        "(target < 20%)"
    )


if __name__ == "__main__":
    main()
