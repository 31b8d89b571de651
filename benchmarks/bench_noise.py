"""Throughput of privframe's exact discrete Gaussian and Laplace against insecure floors and OpenDP.

Prints samples per second on one core (the process is pinned to CPU 0) for
privframe's ``discrete_gaussian``, ``numpy.random.Generator.normal`` (the
insecure floating-point floor privframe never uses for releases) and, with
``--opendp``, OpenDP's discrete Gaussian measurement run in its own
virtualenv (see peers.py), with the ratios of each to privframe. A second
table gives privframe's ``discrete_laplace`` at the same scales, against
``numpy.random.Generator.laplace`` and against the discrete Gaussian.

Usage:
    python benchmarks/bench_noise.py [--size 2000000] [--repeat 3] [--opendp]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import privframe as pf

SCALES = (1.0, 1e3, 1e6, 1e9)  # σ of the Gaussian, b of the Laplace

OPENDP_SNIPPET = """
import json, time
import opendp.prelude as dp
dp.enable_features("contrib")
out = {{}}
for sigma in {scales!r}:
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=sigma
    )
    data = [0] * {size}
    best = float("inf")
    for _ in range({repeat}):
        t0 = time.perf_counter()
        meas(data)
        best = min(best, time.perf_counter() - t0)
    out[str(sigma)] = {size} / best
print(json.dumps({{"version": dp.__version__ if hasattr(dp, "__version__") else "", "rates": out}}))
"""


def best_rate(fn, size: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(size)
        best = min(best, time.perf_counter() - t0)
    return size / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big", type=int, default=20_000_000, help="size of one large draw")
    parser.add_argument("--opendp", action="store_true", help="also time OpenDP (own venv)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})

    gen = np.random.default_rng()
    floor = best_rate(lambda n: gen.normal(size=n), args.size, args.repeat)
    laplace_floor = best_rate(lambda n: gen.laplace(size=n), args.size, args.repeat)
    ours = {
        s: best_rate(lambda n, s=s: pf.discrete_gaussian(s, n), args.size, args.repeat)
        for s in SCALES
    }
    laplace = {
        s: best_rate(lambda n, s=s: pf.discrete_laplace(s, n), args.size, args.repeat)
        for s in SCALES
    }
    peer: dict[str, float] = {}
    if args.opendp:
        from peers import run_snippet

        code = OPENDP_SNIPPET.format(scales=SCALES, size=args.size, repeat=args.repeat)
        peer = run_snippet("opendp", code)["rates"]

    print(
        f"# discrete Gaussian throughput, one core ({platform.processor() or platform.machine()})"
    )
    print(f"# {args.size:,} samples per draw, best of {args.repeat}; numpy {np.__version__}")
    header = f"{'sigma':>8} {'privframe/s':>13} {'numpy normal/s':>15} {'privframe/numpy':>16}"
    if peer:
        header += f" {'OpenDP/s':>12} {'privframe/OpenDP':>17}"
    print(header)
    for s, rate in ours.items():
        line = f"{s:>8.0e} {rate:>13,.0f} {floor:>15,.0f} {rate / floor:>16.3f}"
        if peer:
            theirs = peer[str(s)]
            line += f" {theirs:>12,.0f} {rate / theirs:>17.1f}"
        print(line)
    print("# discrete Laplace throughput, same draws")
    print(
        f"{'scale':>8} {'privframe/s':>13} {'numpy laplace/s':>16} {'privframe/numpy':>16} "
        f"{'laplace/gaussian':>17}"
    )
    for s, rate in laplace.items():
        print(
            f"{s:>8.0e} {rate:>13,.0f} {laplace_floor:>16,.0f} {rate / laplace_floor:>16.3f} "
            f"{rate / ours[s]:>17.2f}"
        )
    t0 = time.perf_counter()
    pf.discrete_gaussian(1e3, args.big)
    print(f"# one draw of {args.big:,} samples at sigma=1e3: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
