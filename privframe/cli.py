"""The ``privframe`` command line: ``privframe demo`` runs the README example end to end.

Example:
    >>> from privframe.cli import build_parser
    >>> build_parser().parse_args(["demo", "--rows", "5000"]).rows
    5000
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from privframe.errors import PrivframeError

if TYPE_CHECKING:
    from privframe.query import Query
    from privframe.session import Session

__all__ = ["build_parser", "main"]

_KEYS = ["north", "south", "east", "west"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``privframe`` command."""
    parser = argparse.ArgumentParser(
        prog="privframe",
        description="Differentially private grouped analytics on dataframes.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser(
        "demo",
        help="run the README example on bundled synthetic data",
        description=(
            "Build a Session on synthetic transactions (privacy unit user_id, budget "
            "rho = 1 zCDP), explain the README query, release it and print the budget left. "
            "The data is synthetic and seeded; the noise comes from the OS CSPRNG."
        ),
    )
    demo.add_argument(
        "--rows", type=_positive_int, default=100_000, help="rows of synthetic data (100000)"
    )
    demo.add_argument(
        "--rho", type=_positive_float, default=0.1, help="zCDP budget the release spends (0.1)"
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the synthetic data (0)")
    return parser


def readme_query(sess: Session) -> Query:
    """The README's example query on a session over ``synthetic_transactions`` columns.

    Example:
        >>> import privframe as pf
        >>> from privframe.cli import readme_query
        >>> sess = pf.Session(pf.datasets.synthetic_transactions(1_000), "user_id", pf.zCDP(1.0))
        >>> [a.output_name for a in readme_query(sess).plan.aggregates]
        ['count', 'amount_sum', 'avg_amount']
    """
    import privframe as pf

    return (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=3, max_rows_per_group=5)
        .group_by("region", keys=_KEYS)
        .agg(
            pf.count(),
            pf.sum("amount", bounds=(0, 1000)),
            pf.mean("amount", bounds=(0, 1000)).alias("avg_amount"),
        )
    )


def _demo(rows: int, rho: float, seed: int) -> None:
    import privframe as pf
    from privframe.datasets import synthetic_transactions

    df = synthetic_transactions(n_rows=rows, seed=seed)
    print(
        f"data: {rows:,} synthetic transactions (seed {seed}); privacy unit user_id; "
        "budget rho = 1 (zCDP)\n"
    )
    sess = pf.Session(df, privacy_unit="user_id", budget=pf.zCDP(rho=1.0))
    query = readme_query(sess)
    print("== explain (spends nothing) ==")
    print(query.explain(rho=rho))
    result = query.release(rho=rho, with_error=True, label="privframe demo")
    print(f"\n== released at rho = {rho:g} ==")
    with pl.Config(
        tbl_cols=-1,
        tbl_width_chars=200,
        float_precision=2,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
    ):
        print(result)
    print("\n== budget ==")
    print(sess.report())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 on success, 2 on a refused input)."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            _demo(args.rows, args.rho, args.seed)
    except PrivframeError as err:
        print(f"privframe: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
