"""``privframe admin CONFIG COMMAND ...``: a server's analysts, tokens, grants and budgets.

The data owner runs it beside the server, on the configuration file the
server reads (``CONFIG``); it changes the server's database
(:class:`~privframe.api.server.store.Store`), also while the server runs: a
top-up or a revoked token applies to the next request. Commands::

    add-analyst NAME                          add an analyst; prints its token, once
    token NAME                                a new token for NAME; its old ones stop working
    revoke NAME                               every token of NAME stops working
    grant NAME DATASET BUDGET                 grant DATASET to NAME with a budget
    top-up NAME DATASET BUDGET                add to NAME's budget on DATASET
    set-budget NAME DATASET BUDGET            set NAME's budget on DATASET
    list                                      analysts, grants, budgets, spent, remaining
    datasets                                  each dataset's cap and what all spent on it
    verify                                    check every ledger and each dataset's total
    audit [--limit N]                         the latest audit records

A BUDGET is ``--rho R [--delta D]`` (zCDP: releases spend ρ), ``--epsilon E``
(pure DP: releases spend ε) or ``--epsilon E --delta D`` ((ε, δ)-DP: releases
spend ε and δ). A grant keeps the kind it was made with: a top-up or a new
budget in another kind is refused (``--epsilon E`` alone tops up an (ε, δ)
grant's ε). Budgets are read exactly as written (``0.1`` is 1/10; ``1/3`` is
a third). Every change is recorded in the audit log (action
``admin:<command>``, the analyst it names). A problem is one line on stderr
and exit code 2.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from privframe.api.server.admin import main
    >>> folder = Path(tempfile.mkdtemp())
    >>> config = folder / "serve.toml"
    >>> _ = config.write_text('''
    ... [datasets.sales]
    ... data = "sales.parquet"
    ... privacy_unit = "customer"
    ... ''')
    >>> main([str(config), "add-analyst", "alice"])  # doctest: +ELLIPSIS
    Token for analyst 'alice': pf_...
    It is shown only now: give it to alice privately.
    A new one: privframe admin CONFIG token alice (the old one then stops working).
    0
    >>> main([str(config), "grant", "alice", "sales", "--rho", "0.5"])
    Granted 'sales' to 'alice' with rho=0.5, delta=0.
    0
    >>> main([str(config), "list"])
    analyst  dataset  budget rho  spent rho  remaining rho
    alice    sales    0.5         0          0.5
    0
    >>> main([str(config), "add-analyst", "bob"])  # doctest: +ELLIPSIS
    Token for analyst 'bob': pf_...
    0
    >>> main([str(config), "grant", "bob", "sales", "--epsilon", "1", "--delta", "1e-6"])
    Granted 'sales' to 'bob' with epsilon=1, delta=1e-06.
    0
    >>> main([str(config), "top-up", "bob", "sales", "--rho", "1"])  # the grant keeps its kind
    2
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from fractions import Fraction

from privframe.accounting._kinds import KINDS, Kind, Spendable, columns, with_article
from privframe.accounting._report import figure
from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
from privframe.api.server.config import ServerConfig, load_config
from privframe.api.server.store import Store
from privframe.errors import InvalidBudgetError, PrivframeError

__all__ = ["main"]


class _UsageError(Exception):
    """A command line argparse refuses (raised instead of argparse's exit)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(message)


def _amount(text: str) -> Fraction:
    """A budget figure as written: a decimal (``0.1`` is exactly 1/10) or a ratio (``1/3``)."""
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        pass
    raise argparse.ArgumentTypeError(f"expected a number such as 0.5 or 1/3, got {text[:40]!r}")


def _limit(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text[:40]!r}")
    return int(text)


def _parser() -> _Parser:
    parser = _Parser(
        prog="privframe admin",
        description="Manage the analysts, tokens and budgets of a privframe server.",
    )
    parser.add_argument("config", help="the server's configuration file (TOML)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, text in (
        ("add-analyst", "add an analyst and print its token (shown only once)"),
        ("token", "make a new token for an analyst; its old tokens stop working"),
        ("revoke", "revoke every token of an analyst"),
    ):
        commands.add_parser(name, help=text).add_argument("name", help="the analyst")
    for name, text in (
        ("grant", "grant a dataset to an analyst with a budget"),
        ("top-up", "add to an analyst's budget on a dataset"),
        ("set-budget", "set an analyst's budget on a dataset"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("name", help="the analyst")
        command.add_argument("dataset", help="a dataset of the configuration")
        budget = command.add_mutually_exclusive_group(required=True)
        budget.add_argument("--rho", type=_amount, help="a zCDP budget's rho")
        budget.add_argument(
            "--epsilon",
            type=_amount,
            help="a pure-DP budget's epsilon; with --delta, an (epsilon, delta) budget's",
        )
        command.add_argument(
            "--delta", type=_amount, help="delta (0 if left out; with --epsilon: (epsilon, delta))"
        )
    commands.add_parser("list", help="analysts, their grants, budgets, spent and remaining")
    commands.add_parser(
        "datasets", help="each dataset's cap across analysts and what they spent together"
    )
    commands.add_parser(
        "verify", help="check every ledger's entries and totals (privframe serve does at start)"
    )
    audit = commands.add_parser("audit", help="the latest records of the audit log")
    audit.add_argument("--limit", type=_limit, default=50, help="how many records (50)")
    return parser


def _show(budget: Spendable) -> str:
    """A budget as the commands print it: ``rho=0.5, delta=0``, ``epsilon=1`` or with delta."""
    if isinstance(budget, zCDP):
        return f"rho={figure(budget.exact_rho)}, delta={figure(budget.exact_delta)}"
    if isinstance(budget, PureDP):
        return f"epsilon={figure(budget.exact_epsilon)}"
    return f"epsilon={figure(budget.exact_epsilon)}, delta={figure(budget.exact_delta)}"


_FLAGS = {
    zCDP: "--rho R (and --delta D)",
    PureDP: "--epsilon E",
    ApproxDP: "--epsilon E (and --delta D)",
}
"""What the command line gives for a budget of each kind."""


def _amount_of(args: argparse.Namespace, kind: Kind | None) -> Spendable:
    """The budget the command line gives, of the kind ``kind`` of the grant it changes.

    ``--rho`` makes a zCDP budget; ``--epsilon`` a PureDP one, or an ApproxDP
    one with ``--delta`` or for an ApproxDP grant (whose ε alone it tops up).
    """
    delta = Fraction(0) if args.delta is None else args.delta
    if args.rho is not None:
        return zCDP(args.rho, delta)
    if args.delta is None and kind is not ApproxDP:
        return PureDP(args.epsilon)
    return ApproxDP(args.epsilon, delta)


def _dataset(config: ServerConfig, name: str) -> str:
    if name not in config.datasets:
        served = ", ".join(sorted(config.datasets))
        raise _UsageError(
            f"dataset {name[:64]!r} is not in {str(config.path)!r} (its datasets: {served})"
        )
    return name


def _token(name: str, token: str) -> None:
    print(f"Token for analyst {name!r}: {token}")
    print(f"It is shown only now: give it to {name} privately.")
    print(f"A new one: privframe admin CONFIG token {name} (the old one then stops working).")


def _budget_command(store: Store, config: ServerConfig, args: argparse.Namespace) -> str:
    dataset, name = _dataset(config, args.dataset), args.name
    granted = None if args.command == "grant" else store.budget(name, dataset)
    amount = _amount_of(args, None if granted is None else type(granted))
    if granted is not None and type(amount) is not type(granted):
        kind = type(granted).__name__
        raise InvalidBudgetError(
            f"{name!r}'s grant on {dataset!r} is {with_article(kind)} budget ({_show(granted)}), "
            f"and a grant keeps the kind it was made with: give {_FLAGS[type(granted)]}"
        )
    if args.command == "grant":
        store.grant(name, dataset, amount)
        print(f"Granted {dataset!r} to {name!r} with {_show(amount)}.")
    elif args.command == "top-up":
        budget = store.top_up(name, dataset, amount)
        print(
            f"Topped up {name!r} on {dataset!r} by {_show(amount)}: its budget is {_show(budget)}."
        )
    else:
        store.set_budget(name, dataset, amount)
        print(f"Set the budget of {name!r} on {dataset!r} to {_show(amount)}.")
    return _show(amount)


def _list(store: Store) -> None:
    """One row per grant (and per analyst without one); delta columns when a grant has delta.

    With zCDP grants only, the amounts are ρ; otherwise a ``kind`` column
    says what each row's amounts are (ρ, or ε), and spent is what the grant
    was charged (for an (ε, δ) grant, the tight composition of its releases).
    """
    grants: list[tuple[str, str, Spendable, Spendable]] = []
    analysts: list[str] = []
    for analyst in store.analysts():
        datasets = store.granted(analyst)
        if not datasets:
            analysts.append(analyst)
        for dataset in datasets:
            budget = store.budget(analyst, dataset) or zCDP(0)
            grants.append((analyst, dataset, budget, store.spent(analyst, dataset)))
    zcdp_only = all(isinstance(budget, zCDP) for _, _, budget, _ in grants)
    header = ["analyst", "dataset", "budget rho", "spent rho", "remaining rho"]
    if not zcdp_only:
        header = ["analyst", "dataset", "kind", "budget", "spent", "remaining"]
    rows = [[*header, "budget delta", "spent delta"]]
    for analyst, dataset, budget, spent in grants:
        (first, second), (used, used_delta) = columns(budget), columns(spent)
        figures = (first, used, max(first - used, Fraction(0)), second, used_delta)
        kind = [] if zcdp_only else [_unit(type(budget))]
        rows.append([analyst, dataset, *kind, *map(figure, figures)])
    rows += [[analyst] + ["-"] * (len(rows[0]) - 1) for analyst in analysts]
    rows[1:] = sorted(rows[1:], key=lambda row: row[0])  # by analyst, each's grants in order
    if all(row[-2] in ("0", "-") and row[-1] in ("0", "-") for row in rows[1:]):
        rows = [row[:-2] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def _unit(kind: Kind) -> str:
    """A grant's kind and the parameter its amounts are in, for the list."""
    return f"{kind.__name__}({'rho' if kind is zCDP else 'epsilon'})"


def _datasets(store: Store, config: ServerConfig) -> None:
    """Per dataset: the cap in force, the configuration's if it differs, and the total spent."""
    for name, dataset in config.datasets.items():
        cap = store.ledgers.cap(name)
        line = f"{name}: cap {_show(cap) if cap is not None else 'none'}"
        if cap != dataset.cap:
            wanted = _show(dataset.cap) if dataset.cap is not None else "none"
            line += f" (the configuration says {wanted}: privframe serve applies it at start)"
        kinds = {
            type(store.budget(analyst, name))
            for analyst in store.analysts()
            if name in store.granted(analyst)
        }
        if len(kinds) > 1:
            spent = "; ".join(
                f"{kind.__name__} grants {_show(store.pool_spent(name, kind))}"
                for kind in KINDS
                if kind in kinds
            )
            print(f"{line}; all analysts together spent: {spent}")
        else:
            print(f"{line}; all analysts together spent {_show(store.pool_spent(name))}")


def _audit(store: Store, limit: int) -> None:
    for record in store.audit_records(limit):
        print(
            f"{record.time}  {record.analyst or '-'}  {record.action}  {record.dataset or '-'}  "
            f"{record.status}  {record.detail}".rstrip()
        )


def _run(store: Store, config: ServerConfig, args: argparse.Namespace) -> tuple[str, str]:
    """Run one command; what the audit log records of it: its dataset and detail."""
    command = args.command
    if command == "add-analyst":
        _token(args.name, store.add_analyst(args.name))
    elif command == "token":
        _token(args.name, store.new_token(args.name))
    elif command == "revoke":
        store.revoke(args.name)
        print(
            f"Revoked every token of {args.name!r}; privframe admin CONFIG token makes a new one."
        )
    elif command in ("grant", "top-up", "set-budget"):
        return args.dataset, _budget_command(store, config, args)
    elif command == "list":
        _list(store)
    elif command == "datasets":
        _datasets(store, config)
    elif command == "verify":
        count = store.verify()
        print(f"Verified {count} ledger{'s' if count != 1 else ''} and each dataset's total.")
    else:
        _audit(store, args.limit)
    return "", ""


def _fail(message: str) -> int:
    print(f"privframe admin: error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str]) -> int:
    """Run ``privframe admin`` with ``argv`` (``CONFIG COMMAND ...``); the exit code.

    0 on success; 2, with one line on stderr, when the command line, the
    configuration, a name, a budget or the database is refused.
    """
    try:
        args = _parser().parse_args(list(argv))
    except _UsageError as err:
        return _fail(f"{err} (see privframe admin CONFIG --help)")
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else 0
    try:
        config = load_config(args.config)
        store = Store(config.database)
    except PrivframeError as err:
        return _fail(str(err))
    try:
        return _audited(store, config, args)
    finally:
        store.close()


def _audited(store: Store, config: ServerConfig, args: argparse.Namespace) -> int:
    """Run the command and record it in the audit log (not those that change nothing)."""
    try:
        dataset, detail = _run(store, config, args)
        status, message = 200, ""
    except (PrivframeError, _UsageError) as err:
        dataset, detail = getattr(args, "dataset", ""), type(err).__name__
        status, message = 400, str(err)
    if args.command not in ("list", "datasets", "audit", "verify"):
        try:
            store.audit(analyst=getattr(args, "name", None), action=f"admin:{args.command}",
                        dataset=dataset or None, status=status, detail=detail)  # fmt: skip
        except PrivframeError as err:
            done = "it failed" if message else "the change was made"
            message = f"{message or 'done'}; {done}, but the audit log was not written: {err}"
    return _fail(message) if message else 0
