"""The ``privframe`` command line: ``demo``, ``report``, ``plan``, ``synthesize``, ``serve``...

``privframe demo`` runs the README example end to end (or, with
``--write-data``, writes its synthetic data to a file); ``privframe report``
runs a scripted report (``docs/reports.md``) and ``privframe plan`` shows
each of its outputs' 95% interval before anything is spent (and, with
``--html``, a chart of them against the total budget); ``privframe synthesize`` makes
one differentially private synthetic table (``docs/reports.md``);
``privframe serve`` serves datasets to analysts and ``privframe admin``
manages their tokens and budgets (``docs/server.md``).

Example:
    >>> from privframe.api.cli import build_parser
    >>> build_parser().parse_args(["demo", "--rows", "5000"]).rows
    5000
    >>> build_parser().parse_args(["report", "spec.toml", "--dry-run"]).dry_run
    True
    >>> build_parser().parse_args(["report", "spec.toml", "--no-progress"]).no_progress
    True
    >>> build_parser().parse_args(["synthesize", "d.csv", "--unit", "id", "--rho", "1"]).method
    'aim'
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from privframe import progress
from privframe.accounting.budgets import zCDP
from privframe.api.datasets import REGIONS, synthetic_transactions
from privframe.api.html import page_html
from privframe.api.planning import plan_budget
from privframe.api.query import Query
from privframe.api.report import (
    NOT_PRIVATE,
    ExitCode,
    ReportError,
    describe_error,
    load_spec,
    prepare,
)
from privframe.api.report_output import write_table
from privframe.api.report_spec import FORMATS
from privframe.api.session import Session
from privframe.api.spec_values import SpecError, read_toml, spec_domains
from privframe.api.sql import Column
from privframe.engines.expressions import Bin
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
    plan = commands.add_parser(
        "plan",
        help="plan a report's budget: each output's 95%% interval before anything is spent",
        description=textwrap.fill(
            "Print each output's 95%% interval at the spec's split of its budget (or at "
            "--rho/--epsilon and --share), and with --html write a page with a chart of each "
            "interval against the total budget. Reads what report --dry-run reads and "
            "spends nothing (pf.plan_budget; docs/getting-started.md).",
            width=78,
        ),
    )
    _plan_arguments(plan)
    synthesize = commands.add_parser(
        "synthesize",
        help="make a differentially private synthetic table (AIM or MST) from a data file",
        description=textwrap.fill(
            "Measure noisy marginals of the data's columns and sample a synthetic table from a "
            "model of them (Session.synthesize): one ledger entry of --rho (zCDP). Every column "
            "needs public values: a domains file, or Boolean columns. --explain prints what "
            "would be measured and spends nothing.",
            width=78,
        ),
        epilog="exit status:\n"
        + "\n".join(
            textwrap.fill(
                meaning, width=78, initial_indent=f"  {int(code)}  ", subsequent_indent="     "
            )
            for code, meaning in _SYNTHESIZE_MEANINGS.items()
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _synthesize_arguments(synthesize)
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


def _plan_arguments(plan: argparse.ArgumentParser) -> None:
    plan.add_argument("spec", help="the report spec (TOML)")
    total = plan.add_mutually_exclusive_group()
    total.add_argument(
        "--rho", type=_positive_float, help="the total rho to plan (zCDP; default: the spec's)"
    )
    total.add_argument(
        "--epsilon",
        type=_positive_float,
        help="the total epsilon to plan (pure DP, (epsilon, delta); default: the spec's)",
    )
    plan.add_argument(
        "--share",
        type=_share,
        action="append",
        metavar="NAME=SHARE",
        help="an entry's share of the total, e.g. by_region=0.5; give one for every entry "
        "(default: the spec's split)",
    )
    plan.add_argument(
        "--rows",
        type=_positive_float,
        metavar="N",
        help="a public guess of the rows in a group, to state a mean's interval as a number",
    )
    plan.add_argument(
        "--html", metavar="FILE", help="also write the plan as a page, with its chart"
    )


def _share(text: str) -> tuple[str, float]:
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=SHARE, got {text!r}")
    return name.strip(), _positive_float(value)


_SYNTHESIZE_MEANINGS = {
    ExitCode.OK: "the table was written to --out (or, with --explain, the plan printed)",
    ExitCode.UNEXPECTED: "an unexpected error before the charge: nothing was spent",
    ExitCode.INVALID: "an argument, the domains file, the data or the ledger was refused: "
    "nothing was spent",
    ExitCode.OVER_BUDGET: "the table does not fit the budget left: nothing was spent",
    ExitCode.FAILED_MIDWAY: "the table was charged, but making or writing it failed",
}


def _synthesize_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("data", help="the data file (.parquet or .csv)")
    unit = command.add_mutually_exclusive_group(required=True)
    unit.add_argument("--unit", metavar="COLUMN", help="the column that identifies a person")
    unit.add_argument(
        "--rows-are-people",
        action="store_true",
        help="there is no privacy unit column: each row is a different person",
    )
    command.add_argument(
        "--rho", type=_positive_float, required=True, help="the zCDP rho the table spends"
    )
    command.add_argument(
        "--budget",
        type=_positive_float,
        metavar="RHO",
        help="the data's whole zCDP budget (required with --ledger, which keeps it across "
        "runs; default: --rho, spent once)",
    )
    command.add_argument(
        "--ledger",
        metavar="FILE",
        help="the SQLite ledger of the data's budget (created on the first run that spends)",
    )
    command.add_argument("--method", choices=("aim", "mst"), default="aim", help="(aim)")
    command.add_argument(
        "--columns",
        type=_names,
        metavar="A,B,...",
        help="the columns to synthesize (default: all but the privacy unit)",
    )
    command.add_argument(
        "--workload",
        type=_names,
        action="append",
        metavar="A,B",
        help="with --method aim: a column set the table should keep well; repeat for more "
        "(default: every pair of columns)",
    )
    command.add_argument(
        "--rows",
        type=_positive_int,
        help="how many rows to sample (default: the model's estimate of the data's size)",
    )
    command.add_argument(
        "--domains",
        metavar="FILE",
        help="a TOML or JSON table of each column's public values or bins, e.g. "
        'sex = ["F", "M"] and age = { bins = [0, 18, 65, 120] } (docs/reports.md)',
    )
    command.add_argument(
        "--max-rows",
        type=_positive_int,
        metavar="M",
        help="the most rows one person keeps (required with --unit)",
    )
    command.add_argument("--out", metavar="PATH", help="the table to write: a new .csv or .parquet")
    command.add_argument(
        "--explain",
        action="store_true",
        help="print what would be measured and what it costs, and spend nothing",
    )


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected column names separated by commas, got {text!r}")
    return names


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
        f"report {spec.title!r}: {report.counted()} released for "
        f"{report.summary()}\nwrote {page} and {len(report.files)} files beside it"
    )
    return ExitCode.OK


def _plan(args: argparse.Namespace) -> ExitCode:
    """Run ``privframe plan``: print the spec's budget plan (and write its page); spend nothing."""
    try:
        shares = None if args.share is None else dict(args.share)
        if shares is not None and len(shares) < len(args.share):
            raise SpecError("--share names an entry twice")
        plan = plan_budget(
            Path(args.spec), rho=args.rho, epsilon=args.epsilon, shares=shares, rows=args.rows
        )
        print(plan)
        if args.html:
            Path(args.html).write_text(page_html("Budget plan", plan.html()), encoding="utf-8")
            print(f"wrote {args.html}")
    except OSError as err:
        _error(f"cannot write {args.html!r}: {err.strerror}; nothing was spent")
        return ExitCode.INVALID
    except Exception as err:
        return _refused(err)
    return ExitCode.OK


def _refused(err: Exception) -> ExitCode:
    """Say why a command stopped before it spent anything; its exit status by the error's kind."""
    if isinstance(err, PrivframeError):
        _error(f"{str(err).rstrip('.')}; nothing was spent")
        return ExitCode.OVER_BUDGET if isinstance(err, BudgetExceededError) else ExitCode.INVALID
    _error(f"unexpected: {describe_error(err)}; nothing was spent")
    return ExitCode.UNEXPECTED


def _read_domains(path: str) -> dict[str, list[Any] | Bin]:
    """The ``--domains`` file (TOML or JSON), read as a report spec's ``domains`` table."""
    target = Path(path)
    if target.suffix.lower() == ".json":
        try:
            raw = json.loads(target.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise SpecError(f"cannot read the domains file {path!r}: {err}") from None
    else:
        raw = read_toml(target, "the domains file")
    return spec_domains(raw, "domains")


def _column_types(domains: Mapping[str, list[Any] | Bin]) -> dict[str, Column]:
    """For a CSV file, each column's type from its public domain: a CSV holds only text.

    Bins bin numbers (float64); a list of whole numbers is int64, of numbers
    float64, of strings text.
    """
    types = {}
    for column, domain in domains.items():
        if isinstance(domain, Bin) or any(isinstance(v, float) for v in domain):
            types[column] = Column(type="float64")
        elif all(isinstance(v, int) for v in domain):
            types[column] = Column(type="int64")
    return types


def _synthesis_session(
    args: argparse.Namespace, domains: Mapping[str, list[Any] | Bin] | None, ledger: str | None
) -> Session:
    """The Session over ``--data``; a CSV file's columns are typed by their domains."""
    csv = Path(args.data).suffix.lower() == ".csv"
    return Session(
        args.data,
        None if args.rows_are_people else args.unit,
        zCDP(args.budget if args.budget is not None else args.rho),
        ledger,
        metadata=_column_types(domains or {}) if csv else None,
    )


def _synthesize(args: argparse.Namespace) -> ExitCode:
    """Run ``privframe synthesize``: check everything, then charge once and write the table."""
    try:
        domains = _read_domains(args.domains) if args.domains else None
        if domains is not None and args.columns is not None:
            # One file may describe every column of the data; --columns picks some.
            domains = {c: d for c, d in domains.items() if c in args.columns}
        if args.ledger is not None and args.budget is None:
            raise SpecError(
                "--ledger keeps the data's whole budget across runs: give it with --budget RHO"
            )
        out = None if args.explain else _new_output(args.out)
        arguments: dict[str, Any] = {
            "method": args.method,
            "columns": args.columns,
            "workload": args.workload,
            "domains": domains,
            "max_rows": args.max_rows,
        }
        fresh = args.ledger is None or not Path(args.ledger).exists()
        # A new ledger file fixes the data's budget: it is created only once every check passed.
        sess = _synthesis_session(args, domains, None if fresh else args.ledger)
        explained = sess.explain_synthesis(args.rho, **arguments)
        sess.check_cost(explained.cost)
        if out is None:
            print(explained)
            print(f"\nexplain: nothing was spent; the budget has {_left(sess)} left")
            return ExitCode.OK
        if args.ledger is not None and fresh:
            sess = _synthesis_session(args, domains, args.ledger)
        before = len(sess.ledger)
    except Exception as err:
        return _refused(err)
    return _make_table(sess, args, arguments, out, before)


def _make_table(
    sess: Session, args: argparse.Namespace, arguments: dict[str, Any], out: Path, before: int
) -> ExitCode:
    """Charge, make and write the table; after the charge, a failure is status 4."""
    failure = None
    try:
        table = sess.synthesize(
            args.rho, rows=args.rows, label=f"synthesize {out.name}", **arguments
        )
        write_table(table, out, seeded=False)
    except (Exception, KeyboardInterrupt) as err:
        failure = err
    if failure is None:
        print(
            f"wrote {len(table)} synthetic rows ({', '.join(map(str, table.columns))}) by "
            f"{args.method.upper()} to {out}; charged rho = {args.rho:g}; the budget has "
            f"{_left(sess)} left"
        )
        return ExitCode.OK
    if len(sess.ledger) == before:
        code = (
            ExitCode.OVER_BUDGET if isinstance(failure, BudgetExceededError) else ExitCode.INVALID
        )
        _error(f"{describe_error(failure).rstrip('.')}; nothing was spent")
        return code
    _error(
        f"rho = {args.rho:g} was charged, but making or writing the table failed: "
        f"{describe_error(failure)}"
    )
    return ExitCode.FAILED_MIDWAY


def _left(sess: Session) -> str:
    """The budget left, in words: ``rho = 0.5`` (the session's budget is zCDP)."""
    left = sess.remaining
    return f"rho = {left.rho:.6g}" if isinstance(left, zCDP) else repr(left)


def _new_output(path: str | None) -> Path:
    """``--out``: a new .csv or .parquet file in an existing folder (checked before the charge)."""
    if path is None:
        raise SpecError("give --out PATH (.csv or .parquet) for the table, or --explain")
    out = Path(path)
    if out.suffix.lower().lstrip(".") not in FORMATS:
        raise SpecError(f"--out {path!r}: write the table as .csv or .parquet")
    if out.exists():
        raise SpecError(f"--out {path!r} exists: a paid-for table is never overwritten")
    if not out.parent.is_dir():
        raise SpecError(f"--out {path!r}: the folder {str(out.parent)!r} does not exist")
    return out


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

    ``demo``: 0 on success, 2 on a refused input. ``report`` and
    ``synthesize``: see :class:`~privframe.api.report.ExitCode` (``privframe
    synthesize --help`` says what each means for it).
    """
    args = build_parser().parse_args(argv)
    if args.command == "admin":
        from privframe.api.server import admin  # the server's extra, only when asked for

        return admin.main(args.arguments)
    if args.command == "serve":
        return _serve(args.config)
    if args.command == "synthesize":
        return _synthesize(args)
    if args.command == "plan":
        return _plan(args)
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
