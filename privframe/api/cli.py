"""The ``privframe`` command line: ``demo``, ``report``, ``serve`` and ``admin``.

``privframe demo`` runs the README example end to end (or, with
``--write-data``, writes its synthetic data to a file); ``privframe report``
runs a scripted report (``docs/reports.md``); ``privframe serve`` serves
datasets to analysts and ``privframe admin`` manages their tokens and budgets
(``docs/server.md``).

Example:
    >>> from privframe.api.cli import build_parser
    >>> build_parser().parse_args(["demo", "--rows", "5000"]).rows
    5000
    >>> build_parser().parse_args(["report", "spec.toml", "--dry-run"]).dry_run
    True
    >>> build_parser().parse_args(["report", "spec.toml", "--no-progress"]).no_progress
    True
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

from privframe import progress
from privframe.accounting.budgets import zCDP
from privframe.api.datasets import REGIONS, synthetic_transactions
from privframe.api.query import Query
from privframe.api.report import (
    NOT_PRIVATE,
    ExitCode,
    ReportError,
    describe_error,
    load_spec,
    prepare,
)
from privframe.api.session import Session
from privframe.errors import BudgetExceededError, InvalidValueError, PrivframeError
from privframe.plan import aggregates as agg

__all__ = ["build_parser", "main"]


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
    _demo_arguments(demo)
    report = commands.add_parser(
        "report",
        help="run a scripted report: a TOML spec of queries -> CSV files and report.html",
        description=textwrap.fill(
            "Check every query of the spec and that the whole report fits the budget left in "
            "its ledger, then release the queries in order: one CSV per query (with error "
            "columns) and a self-contained report.html in --out. Nothing is spent unless every "
            "check passes. The spec format is in docs/reports.md.",
            width=78,
        ),
        epilog="exit status:\n"
        + "\n".join(
            textwrap.fill(
                code.meaning, width=78, initial_indent=f"  {int(code)}  ", subsequent_indent="     "
            )
            for code in ExitCode
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _report_arguments(report)
    serve = commands.add_parser(
        "serve",
        help="serve datasets to analysts, each with a budget (needs privframe[server])",
        description=(
            "Serve the datasets of a configuration file (docs/server.md) over HTTP(S): analysts "
            "query them with pf.connect and the same API, never seeing a row, each charged to "
            "their own budget in the server's database. Manage analysts with privframe admin."
        ),
    )
    serve.add_argument("config", help="the server's configuration (TOML)")
    admin = commands.add_parser(
        "admin",
        help="manage a server's analysts, tokens and budgets: privframe admin CONFIG --help",
        add_help=False,
    )
    admin.add_argument("arguments", nargs=argparse.REMAINDER)
    return parser


def _demo_arguments(demo: argparse.ArgumentParser) -> None:
    demo.add_argument(
        "--rows", type=_positive_int, default=100_000, help="rows of synthetic data (100000)"
    )
    demo.add_argument(
        "--rho", type=_positive_float, default=0.1, help="zCDP budget the release spends (0.1)"
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the synthetic data (0)")
    demo.add_argument(
        "--write-data",
        metavar="PATH",
        help="write the synthetic data (--rows, --seed) to PATH (.parquet or .csv) and stop",
    )


def _report_arguments(report: argparse.ArgumentParser) -> None:
    report.add_argument("spec", help="the report spec (TOML)")
    report.add_argument(
        "--out",
        metavar="DIR",
        help="where to write the CSV files and report.html (default: <spec name>-report "
        "beside the spec)",
    )
    report.add_argument(
        "--dry-run",
        action="store_true",
        help="check the spec, the queries and the budget, print the plan, and spend nothing",
    )
    report.add_argument(
        "--no-progress",
        action="store_true",
        help="show no progress bar (in a terminal) or progress log events (elsewhere) while "
        "the queries are computed; the lines on stderr stay",
    )
    report.add_argument(
        "--server",
        metavar="URL",
        help="run on a privframe server: the spec's [data] dataset = ... names the dataset, the "
        "token is read from PRIVFRAME_TOKEN, and the budget is yours on the server "
        "(docs/server.md)",
    )
    report.add_argument(
        "--ca",
        metavar="FILE",
        help="with --server: the CA certificate(s) the server's certificate is checked against",
    )
    report.add_argument(
        "--allow-seeded-noise",
        action="store_true",
        help="for tests only: accept the spec's [report] seed, which makes the noise "
        "reproducible and the results NOT private (a seed without this flag is refused); "
        "every output then starts with NOT PRIVATE",
    )


def readme_query(sess: Session) -> Query:
    """The README's example query on a session over ``synthetic_transactions`` columns.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.cli import readme_query
        >>> sess = pf.Session(pf.datasets.synthetic_transactions(1_000), "user_id", pf.zCDP(1.0))
        >>> [a.output_name for a in readme_query(sess).plan.aggregates]
        ['count', 'amount_sum', 'avg_amount']
    """
    return (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=3, max_rows_per_group=5)
        .group_by("region", keys=list(REGIONS))
        .agg(
            agg.count(),
            agg.sum("amount", bounds=(0, 1000)),
            agg.mean("amount", bounds=(0, 1000)).alias("avg_amount"),
        )
    )


def _demo(rows: int, rho: float, seed: int) -> None:
    df = synthetic_transactions(n_rows=rows, seed=seed)
    print(
        f"data: {rows:,} synthetic transactions (seed {seed}); privacy unit user_id; "
        "budget rho = 1 (zCDP)\n"
    )
    sess = Session(df, privacy_unit="user_id", budget=zCDP(rho=1.0))
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


def _write_data(path: str, rows: int, seed: int) -> None:
    target = Path(path)
    writers: dict[str, Callable[[pl.DataFrame, Path], object]] = {
        ".parquet": pl.DataFrame.write_parquet,
        ".csv": pl.DataFrame.write_csv,
    }
    if target.suffix.lower() not in writers:
        raise InvalidValueError(f"--write-data needs a .parquet or .csv path, got {path!r}")
    writers[target.suffix.lower()](synthetic_transactions(n_rows=rows, seed=seed), target)
    print(f"wrote {rows:,} synthetic transactions (seed {seed}) to {path}")


def _error(message: str) -> None:
    print(f"privframe: error: {message}", file=sys.stderr)


def _report(args: argparse.Namespace) -> ExitCode:
    """Run ``privframe report``; every outcome maps to one :class:`~.report.ExitCode`."""
    out, dry_run = args.out, args.dry_run
    try:
        spec = load_spec(args.spec, allow_seeded_noise=args.allow_seeded_noise)
        if spec.seed is not None:
            # First on both streams, before anything else is printed.
            print(NOT_PRIVATE, flush=True)
            print(NOT_PRIVATE, file=sys.stderr, flush=True)
        report = prepare(spec, dry_run=dry_run, server=args.server, verify=args.ca or True)
        if dry_run:
            print(report.plan_text())
            print("\ndry run: nothing was spent")
            return ExitCode.OK
        page = report.run(Path(out) if out else spec.path.parent / f"{spec.path.stem}-report")
    except KeyboardInterrupt:
        # Report.run turns an interrupt while computing into a ReportError and holds
        # one back while it charges and writes: one that reaches here came earlier.
        _error("interrupted before any release. Charged to the ledger: nothing.")
        return ExitCode.FAILED_MIDWAY
    # Most specific first: a ReportError and a BudgetExceededError are PrivframeErrors too.
    except ReportError as err:
        _error(str(err))
        return ExitCode.FAILED_MIDWAY
    except BudgetExceededError as err:
        _error(str(err))
        return ExitCode.OVER_BUDGET
    except PrivframeError as err:
        _error(str(err))
        return ExitCode.INVALID
    except Exception as err:
        # Report.run turns every failure during the releases into a ReportError, so
        # whatever reaches here happened before anything was spent.
        _error(f"unexpected: {describe_error(err)}; nothing was spent")
        return ExitCode.UNEXPECTED
    print(
        f"report {spec.title!r}: {len(report.planned)} queries released for "
        f"{report.summary()}\nwrote {page} and {len(report.planned)} CSV files beside it"
    )
    return ExitCode.OK


def _serve(config_path: str) -> int:
    """Run ``privframe serve`` until interrupted; 2 if the configuration or database is refused."""
    from privframe.api.server.config import load_config

    try:
        config = load_config(config_path)
        from privframe.api.server import app  # the server's extra, only when asked for
    except ImportError:
        _error("privframe serve needs the server extra: pip install 'privframe[server]'")
        return 2
    except PrivframeError as err:
        _error(str(err))
        return 2
    try:
        app.serve(config)
    except PrivframeError as err:
        _error(str(err))
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    ``demo``: 0 on success, 2 on a refused input. ``report``: see
    :class:`~privframe.api.report.ExitCode`.
    """
    args = build_parser().parse_args(argv)
    if args.command == "admin":
        from privframe.api.server import admin  # the server's extra, only when asked for

        return admin.main(args.arguments)
    if args.command == "serve":
        return _serve(args.config)
    if args.command == "report":
        with progress.disabled() if args.no_progress else contextlib.nullcontext():
            return _report(args)
    try:
        if args.write_data:
            _write_data(args.write_data, args.rows, args.seed)
        else:
            _demo(args.rows, args.rho, args.seed)
    except PrivframeError as err:
        _error(str(err))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
