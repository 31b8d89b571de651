"""Beyond public keys and the basic three: selection, distinct counts, variance, quantiles,
bins, joins, "other" groups, balanced budget splits and a delta reserve.

Run: python examples/beyond_public_keys.py
"""

from __future__ import annotations

import polars as pl

import privframe as pf


def main() -> None:
    df = pf.datasets.synthetic_transactions(n_rows=200_000, seed=4)
    # The budget carries delta for choosing groups privately.
    sess = pf.Session(df, privacy_unit="user_id", budget=pf.zCDP(rho=1.0, delta=1e-6))

    # 1. Groups chosen from the data: months that clear a noisy distinct-unit threshold.
    months = (
        sess.query()
        .bound(max_groups=3, max_rows_per_group=4)
        .group_by("month")  # no keys
        .agg(pf.count_distinct(), pf.mean("amount", bounds=(0, 500)))
    )
    print(months.explain(rho=0.2, delta=5e-7))
    print(months.release(rho=0.2, delta=5e-7))

    # 2. A public histogram of ages, with a public table joined in and an "other" group.
    zones = pl.DataFrame(
        {"region": ["north", "south", "east", "west"], "zone": ["cold", "warm", "warm", "cold"]}
    )
    ages = pf.bin("age", [16, 30, 45, 65, 91])
    histogram = (
        sess.query()
        .join(zones, on="region")
        .with_columns(age_band=ages)
        .filter(pl.col("zone") == "cold")
        .bound(max_groups=2, max_rows_per_group=5)
        .group_by("age_band", keys=ages.keys[:3], other="65 and over")
        .agg(pf.count(), pf.std("amount", bounds=(0, 500)))
        .release(rho=0.3, with_error=True)
    )
    print(histogram)

    # 3. Quantiles per region, with rho split to balance relative error (public guesses).
    quantiles = (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=5)
        .group_by("region", keys=["north", "south", "east", "west"])
        .agg(
            pf.count(),
            pf.median("amount", bounds=(0, 1000)),
            *pf.quantile("age", [0.1, 0.9], bounds=(18, 90), candidates=73),
            pf.mean("amount", bounds=(0, 1000)),
        )
    )
    balance = pf.balance(rows=20_000, amount_mean=40)
    print(quantiles.explain(rho=0.3, weights=balance))
    print(quantiles.release(rho=0.3, weights=balance, with_error=True))
    print(sess.report())

    # 4. An (epsilon, delta) budget that keeps part of delta for choosing groups.
    budget = pf.ApproxDP(epsilon=2.0, delta=1e-6).to_zcdp(selection_delta=1e-7)
    approx = pf.Session(df, privacy_unit="user_id", budget=budget)
    print(
        approx.query()
        .bound(max_groups=3, max_rows_per_group=4)
        .group_by("month")
        .agg(pf.count())
        .release(rho=approx.remaining.rho)
    )
    print(approx.report())


if __name__ == "__main__":
    main()
