"""``query.tune`` on a heavy tail: CPS1988 wages, tuned against naive bounds at equal ρ.

Data: CPS1988 (Current Population Survey, March 1988; R package AER, Kleiber &
Zeileis): 28,155 men's weekly wages in dollars, one row per person. Wages are
skewed: median 522, p99 2,208, maximum 18,777; the 41 people above 2,896 hold
1.3% of the total.

Query: the sum and the mean of ``wage`` (no groups); the privacy unit is the
person (a row id, one row each).

* **naive**: bounds ``(0, 20000)`` (above every wage), released at ρ = 0.5;
* **tuned**: the naive query tuned with ``tune(rho=0.05, plan_rho=0.45)`` on
  the same data, then released at 0.45: the same total ρ;
* **auto**: the query with ``bounds="auto"`` and ``bounds_share(0.1)``,
  released at ρ = 0.5: 0.05 chooses the bounds (Google's ApproxBounds rule,
  then, the groups being public, tune's error model:
  ``privframe.plan.auto_bounds``), 0.45 releases: the same total ρ.

Each variant runs ``--repeat`` times on a fresh session. The benchmark reports
the tuned upper bounds, the relative RMSE of each output against the exact
unbounded value (and the ratio tuned/naive), and tune's *promised* error (its
table's "estimated error", Σ over outputs of (bias² + σ²)/size²) beside the
realised one (the mean over runs of Σ over outputs of ((released − true)/true)²),
and tune's estimated bias of bounding beside the realised one.

Setup (the data stays out of privframe's dependencies): CPS1988 ships as an
``.rda`` file in Debian's ``r-cran-aer``, read with pyreadr in its own virtualenv:

    mkdir -p /tmp/aer && cd /tmp/aer && apt-get download r-cran-aer
    dpkg-deb -x r-cran-aer_*.deb x
    python -m venv /tmp/cps && /tmp/cps/bin/pip install pyreadr pandas
    /tmp/cps/bin/python -c "import pyreadr; pyreadr.read_r(
        '/tmp/aer/x/usr/lib/R/site-library/AER/data/CPS1988.rda')['CPS1988'].to_csv(
        '/tmp/cps1988.csv', index=False)"
    python benchmarks/tune_heavy_tail.py --csv /tmp/cps1988.csv

Usage:
    python benchmarks/tune_heavy_tail.py --csv FILE [--repeat 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import collections
import time
from dataclasses import dataclass

import numpy as np
import polars as pl

import privframe as pf
from privframe.api.query import Query
from privframe.api.tune import tune
from privframe.mechanisms.noise import SeededRandomness

OUTPUTS = ("wage_sum", "wage_mean")
NAIVE_BOUNDS = (0.0, 20000.0)
RHO, TUNE_RHO = 0.5, 0.05
KEYS = {
    "region": ("northeast", "midwest", "south", "west"),
    "smsa": ("no", "yes"),
    "ethnicity": ("cauc", "afam"),
    "parttime": ("no", "yes"),
    "none": ("all",),
}
"""The public levels of CPS1988's factors (the R factor levels): the query's group keys."""


def load(csv: str, by: str) -> pl.DataFrame:
    """The wages, each row its own person, and their group (``by``, or "all" for "none")."""
    raw = pl.read_csv(csv)
    group = raw[by] if by != "none" else pl.Series(["all"] * raw.height)
    return pl.DataFrame(
        {"person": np.arange(raw.height), "group": group, "wage": raw["wage"].cast(pl.Float64)}
    )


def query(
    sess: pf.Session, keys: tuple[str, ...], bounds: tuple[float, float] | str = NAIVE_BOUNDS
) -> Query:
    """The naive query: per group, the sum and mean of wage within (0, 20000), or ``bounds``.

    With ``bounds="auto"`` a share TUNE_RHO/RHO of the release chooses them
    (a share is refused on a query with no automatic bounds).
    """
    start = sess.query().bound(max_groups=1, max_rows_per_group=1)
    if bounds == "auto":
        start = start.bounds_share(TUNE_RHO / RHO)
    return start.group_by("group", keys=list(keys)).agg(
        pf.sum("wage", bounds=bounds).alias("wage_sum"),  # type: ignore[arg-type]
        pf.mean("wage", bounds=bounds).alias("wage_mean"),  # type: ignore[arg-type]
    )


def truth(data: pl.DataFrame, keys: tuple[str, ...]) -> np.ndarray:
    """The exact unbounded sum and mean of wage per group: groups × outputs."""
    exact = data.group_by("group").agg(
        pl.col("wage").sum().alias("wage_sum"), pl.col("wage").mean().alias("wage_mean")
    )
    return released(exact, keys)


def released(table: pl.DataFrame, keys: tuple[str, ...]) -> np.ndarray:
    """A table's outputs, groups × outputs, in the order of ``keys``."""
    ordered = pl.DataFrame({"group": keys}).join(table, on="group", how="left")
    return ordered.select(OUTPUTS).to_numpy()


@dataclass(frozen=True)
class Result:
    """What ``--repeat`` runs measured."""

    rmse: dict[str, np.ndarray]  # per variant, the relative RMSE of each output
    promised: float  # tune's estimated error (chosen), mean over runs
    realised: float  # mean over runs and groups of Σ over outputs ((released − true)/true)²
    gain: float  # tune's promised given/chosen estimated error, median over runs
    bias_promised: float  # tune's estimated relative bias of the sum, mean over runs
    bias_realised: float  # the chosen bounds' clipping of the sum, relative, mean over runs
    uppers: collections.Counter[float]  # chosen upper bounds and how often
    auto_uppers: collections.Counter[float]  # bounds="auto"'s upper bounds and how often
    tune_seconds: float  # per tune


def run(data: pl.DataFrame, keys: tuple[str, ...], repeat: int, seed: int) -> Result:
    """Errors of both variants, tune's promises and its choices over ``repeat`` runs."""
    wages = data["wage"].to_numpy()
    true = truth(data, keys)
    errors: dict[str, list[np.ndarray]] = {"naive": [], "tuned": [], "auto": []}
    auto_uppers: collections.Counter[float] = collections.Counter()
    promised, gains, bias_promised, bias_realised = [], [], [], []
    uppers: collections.Counter[float] = collections.Counter()
    seconds = 0.0
    for i in range(repeat):
        fresh = pf.Session(data, "person", pf.zCDP(RHO), rng=SeededRandomness(seed + 2 * i))
        start = time.perf_counter()
        tuned = tune(query(fresh, keys), TUNE_RHO, plan_rho=RHO - TUNE_RHO)
        seconds += time.perf_counter() - start
        lower, upper = tuned.bounds["wage_sum"]
        uppers[upper] += 1
        promised.append(tuned.choice.error)
        gains.append(tuned.choice.given_error / tuned.choice.error)
        assert tuned.choice.bias is not None  # a local tune always has it
        bias_promised.append(tuned.choice.bias.bias["wage_sum"])
        bias_realised.append(float(np.clip(wages, lower, upper).sum() / wages.sum() - 1))
        errors["tuned"].append(released(tuned.query.release(rho=RHO - TUNE_RHO), keys) / true - 1)
        naive = pf.Session(data, "person", pf.zCDP(RHO), rng=SeededRandomness(seed + 2 * i + 1))
        errors["naive"].append(released(query(naive, keys).release(rho=RHO), keys) / true - 1)
        auto = pf.Session(data, "person", pf.zCDP(RHO), rng=SeededRandomness(seed + 2 * i + 2**20))
        errors["auto"].append(released(query(auto, keys, "auto").release(rho=RHO), keys) / true - 1)
        auto_uppers[auto.ledger[-1].description["auto_bounds"]["chosen"]["wage_sum"][1]] += 1
    relative = {v: np.array(e) for v, e in errors.items()}  # runs × groups × outputs
    return Result(
        rmse={v: np.sqrt(np.mean(np.square(e), axis=(0, 1))) for v, e in relative.items()},
        promised=float(np.mean(promised)),
        # The objective is per group, summed over outputs: the same from the releases.
        realised=float(np.mean(np.square(relative["tuned"]).sum(axis=2))),
        gain=float(np.median(gains)),
        bias_promised=float(np.mean(bias_promised)),
        bias_realised=float(np.mean(bias_realised)),
        uppers=uppers,
        auto_uppers=auto_uppers,
        tune_seconds=seconds / repeat,
    )


def cells(values: np.ndarray) -> str:
    """A markdown table row's cells."""
    return " | ".join(f"{v:.4g}" for v in values) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", required=True, help="CPS1988 as CSV (see setup)")
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--by", choices=sorted(KEYS), default="region", help="the public groups")
    args = parser.parse_args()
    data = load(args.csv, args.by)
    wage = data["wage"]
    print(
        f"CPS1988: {data.height} people; wage p50 {wage.median():.0f}, "
        f"p99 {wage.quantile(0.99):.0f}, max {wage.max():.0f}"
    )
    result = run(data, KEYS[args.by], args.repeat, args.seed)
    print(f"by {args.by}: relative RMSE per group over {args.repeat} releases, total ρ = {RHO:g}\n")
    print(f"| variant | {' | '.join(OUTPUTS)} |\n|---|---|---|")
    print(f"| naive {NAIVE_BOUNDS}, release at {RHO:g} | {cells(result.rmse['naive'])}")
    print(f"| tune at {TUNE_RHO:g}, release at {RHO - TUNE_RHO:g} | {cells(result.rmse['tuned'])}")
    print(f"| tuned / naive | {cells(result.rmse['tuned'] / result.rmse['naive'])}")
    print(f'| bounds="auto", share {TUNE_RHO / RHO:g} of {RHO:g} | {cells(result.rmse["auto"])}')
    print(f"| auto / naive | {cells(result.rmse['auto'] / result.rmse['naive'])}")
    common = ", ".join(f"{u:g} ({n})" for u, n in result.uppers.most_common(5))
    print(f"\nchosen upper bounds (runs): {common}")
    common = ", ".join(f"{u:g} ({n})" for u, n in result.auto_uppers.most_common(5))
    print(f'bounds="auto" upper bounds (runs): {common}')
    print(
        f"tune's estimated error {result.promised:.3g}, realised {result.realised:.3g} "
        f"(realised/promised {result.realised / result.promised:.2f}); its promised gain "
        f"(given/tuned estimated error), median {result.gain:.3g}"
    )
    print(
        f"estimated bias of the sum {result.bias_promised:+.4f}, realised clipping "
        f"{result.bias_realised:+.4f} (relative to the true sum)"
    )
    print(f"tune took {result.tune_seconds:.2f} s")


if __name__ == "__main__":
    main()
