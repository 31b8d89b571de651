"""Accuracy of ``query.tune`` on real skewed data: hand-picked against tuned bounds, equal ρ.

Data: CDNOW (Fader & Hardie), the full transaction log of 23,570 customers of an
online CD store from January 1997 to June 1998: 69,659 purchases with the
customer id, the date and the dollar value. It ships inside the ``lifetimes``
package (``lifetimes/datasets/CDNOW_master.txt``), which is loaded here only,
never by privframe. Contributions are skewed: most customers buy once, a few
buy dozens of times, and purchase values are long-tailed.

Query: per month (18 public keys), the count of purchases and the sum and mean
of the dollar value; privacy unit: the customer.

* **hand-picked**, released at ρ = R with value bounds ``(0, 1000)``: the
  README benchmark's limits ``bound(max_groups=3, max_rows_per_group=10)``, and
  limits that keep every month, ``bound(max_groups=18, max_rows_per_group=10)``;
* **tuned**: the README-limits query tuned with ``tune(rho=0.1·R, plan_rho=0.9·R)`` on the
  same data, then released at ``0.9·R``: the same total ρ.

Each variant runs ``--repeat`` times (each tuned run tunes afresh) on a fresh
session; the error of each output is measured against the exact, unbounded
per-month value, as a relative RMSE pooled over months and runs
(sqrt(mean((released − true)²/true²))).

Setup (the data stays out of privframe's dependencies):

    python -m venv /tmp/cdnow && /tmp/cdnow/bin/pip install --no-deps lifetimes==0.11.3
    python benchmarks/tune_accuracy.py --lifetimes /tmp/cdnow/lib/python3.11/site-packages

``--lifetimes`` is a folder holding the ``lifetimes`` package (a site-packages
folder); without it the package is looked up on ``sys.path``.

Usage:
    python benchmarks/tune_accuracy.py [--repeat 50] [--rho 1.0 0.1] [--lifetimes DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl

import privframe as pf
from privframe.api.query import Query
from privframe.api.tune import tune

OUTPUTS = ("count", "dollars_sum", "dollars_mean")


def load_cdnow(lifetimes: str | None) -> pl.DataFrame:
    """CDNOW_master.txt from the lifetimes package: customer, month, dollars."""
    if lifetimes is not None:
        path = Path(lifetimes) / "lifetimes" / "datasets" / "CDNOW_master.txt"
    else:
        spec = importlib.util.find_spec("lifetimes")  # finds the package without importing it
        if spec is None or not spec.submodule_search_locations:
            sys.exit("lifetimes is not installed: see the setup in this script's docstring")
        path = Path(spec.submodule_search_locations[0]) / "datasets" / "CDNOW_master.txt"
    raw = pd.read_csv(path, sep=r"\s+", dtype={"customer_id": str, "date": str})
    return pl.DataFrame(
        {
            "customer": raw["customer_id"].astype(int),
            "month": raw["date"].str.slice(0, 6),
            "dollars": raw["dollar_value"].astype(float),
        }
    )


HAND_PICKED = {"README limits": (3, 10), "every month": (18, 10)}
"""Hand-picked (max_groups, max_rows_per_group), each with value bounds (0, 1000)."""


def query(sess: pf.Session, months: list[str], limits: tuple[int, int]) -> Query:
    """The query with hand-picked limits and value bounds."""
    return (
        sess.query()
        .bound(max_groups=limits[0], max_rows_per_group=limits[1])
        .group_by("month", keys=months)
        .agg(
            pf.count(),
            pf.sum("dollars", bounds=(0, 1000)).alias("dollars_sum"),
            pf.mean("dollars", bounds=(0, 1000)).alias("dollars_mean"),
        )
    )


def truth(data: pl.DataFrame, months: list[str]) -> pl.DataFrame:
    """The exact per-month values, without any bounding."""
    exact = data.group_by("month").agg(
        pl.len().alias("count"),
        pl.col("dollars").sum().alias("dollars_sum"),
        pl.col("dollars").mean().alias("dollars_mean"),
    )
    return pl.DataFrame({"month": months}).join(exact, on="month", how="left")


def run(data: pl.DataFrame, months: list[str], rho: float, repeat: int) -> dict[str, object]:
    """Relative RMSE per output for both variants, and the tuned choices seen."""
    exact = truth(data, months)
    variants = [*HAND_PICKED, "tuned"]
    errors: dict[str, dict[str, list[np.ndarray]]] = {v: {o: [] for o in OUTPUTS} for v in variants}
    choices: list[str] = []
    seconds = 0.0
    for _ in range(repeat):
        fresh = pf.Session(data, "customer", pf.zCDP(rho))
        start = time.perf_counter()
        tuned = tune(
            query(fresh, months, HAND_PICKED["README limits"]), 0.1 * rho, plan_rho=0.9 * rho
        )
        seconds += time.perf_counter() - start
        choices.append(f"{tuned.bound} {tuned.bounds['dollars_sum']}")
        released = {
            name: query(pf.Session(data, "customer", pf.zCDP(rho)), months, limits).release(rho)
            for name, limits in HAND_PICKED.items()
        }
        released["tuned"] = tuned.query.release(rho=0.9 * rho)
        for variant, table in released.items():
            for o in OUTPUTS:
                true = exact[o].to_numpy().astype(float)
                errors[variant][o].append((table[o].to_numpy() - true) / true)
    rmse = {
        v: {o: float(np.sqrt(np.mean(np.square(np.concatenate(e))))) for o, e in per.items()}
        for v, per in errors.items()
    }
    common = max(set(choices), key=choices.count)
    return {
        "rmse": rmse,
        "choice": common,
        "share": choices.count(common) / repeat,
        "tune_seconds": seconds / repeat,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--rho", type=float, nargs="+", default=[1.0, 0.1])
    parser.add_argument("--lifetimes", default=None, help="folder holding the lifetimes package")
    args = parser.parse_args()
    data = load_cdnow(args.lifetimes)
    months = sorted(data["month"].unique().to_list())
    per_customer = data.group_by("customer").len()["len"]
    print(
        f"CDNOW: {data.height} purchases by {per_customer.len()} customers over {len(months)} "
        f"months; purchases per customer p50 {per_customer.median():.0f}, "
        f"p99 {per_customer.quantile(0.99):.0f}, max {per_customer.max()}; dollars p50 "
        f"{data['dollars'].median():.2f}, p99 {data['dollars'].quantile(0.99):.2f}, "
        f"max {data['dollars'].max():.2f}"
    )
    print(f"relative RMSE per month over {args.repeat} releases (lower is better)\n")
    print(f"| ρ total | variant | {' | '.join(OUTPUTS)} |")
    print("|---|---|" + "---|" * len(OUTPUTS))
    notes = []
    for rho in args.rho:
        result = run(data, months, rho, args.repeat)
        for variant, per in result["rmse"].items():  # type: ignore[union-attr]
            cells = " | ".join(f"{per[o]:.4f}" for o in OUTPUTS)
            label = (
                "tune at 0.1ρ, release at 0.9ρ"
                if variant == "tuned"
                else f"hand-picked ({variant}), release at ρ"
            )
            print(f"| {rho:g} | {label} | {cells} |")
        notes.append(
            f"ρ = {rho:g}: tuned choice (most common, {result['share']:.0%} of runs): "
            f"{result['choice']}; tune took {result['tune_seconds']:.2f} s"
        )
    print()
    print("\n".join(notes))


if __name__ == "__main__":
    main()
