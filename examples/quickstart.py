"""The README example: a private group-by on synthetic transactions, explained, then released.

Run: python examples/quickstart.py
"""

from __future__ import annotations

import polars as pl

import privframe as pf


def main() -> None:
    # 100,000 demo rows: user_id, region, month, amount, age. Treat it as private.
    df = pf.datasets.synthetic_transactions()
    sess = pf.Session(df, privacy_unit="user_id", budget=pf.zCDP(rho=1.0))

    query = (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=3, max_rows_per_group=5)
        .group_by("region", keys=["north", "south", "east", "west"])
        .agg(
            pf.count(),
            pf.sum("amount", bounds=(0, 1000)),
            pf.mean("amount", bounds=(0, 1000)).alias("avg_amount"),
        )
    )
    print(query.explain(rho=0.1))  # public parameters only; spends nothing

    result = query.release(rho=0.1, with_error=True)  # spends rho = 0.1
    with pl.Config(tbl_cols=-1, tbl_width_chars=200, float_precision=2):
        print(result)

    print(f"\nspent {sess.spent.rho:g}, remaining {sess.remaining.rho:g} (rho, zCDP)")
    print(sess.report())


if __name__ == "__main__":
    main()
