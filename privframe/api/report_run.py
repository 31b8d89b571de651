"""Running a report: every query checked and planned first, then released all or nothing.

:func:`prepare` opens the session on the spec's data and its ledger, builds
every query and explains it at its ρ: a query that does not plan raises
:class:`~privframe.api.report_spec.SpecError`, and a report whose total cost
does not fit what the ledger has left raises
:class:`~privframe.errors.BudgetExceededError`, both before anything is
spent. :meth:`Report.run` then computes every query, charges the whole
report in one ledger step, draws the noise and writes the outputs
(:mod:`privframe.api.report_output`); if it fails after the checks it raises
:class:`ReportError`, which names exactly the queries charged to the ledger.

Example:
    >>> from privframe.api.report_run import describe_error
    >>> describe_error(ValueError("a value from the data"))
    'ValueError (message withheld: it may quote private values)'
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import shutil
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
import polars as pl

from privframe.accounting._kinds import Spendable
from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
from privframe.accounting.ledger import LedgerEntry
from privframe.api import report_output
from privframe.api._frames import Frame
from privframe.api.budget_plan import BudgetPlan, PlanItem, plan_items, query_item, total_of
from privframe.api.client import TOKEN_ENV, RemoteBatch, RemoteSession, connect
from privframe.api.html import ReportSection, report_html
from privframe.api.query import Bound, Query
from privframe.api.report_spec import (
    MarginalsSpec,
    QuerySpec,
    ReportSpec,
    SpecError,
    SyntheticSpec,
)
from privframe.api.session import Batch, Session
from privframe.api.sql import Column, SQLQuery
from privframe.api.synthesis import Explained
from privframe.errors import BudgetExceededError, PrivframeError
from privframe.mechanisms.noise import SeededRandomness
from privframe.numeric import Number
from privframe.plan.aggregates.base import Width
from privframe.plan.explanation import Explanation
from privframe.plan.release import added
from privframe.plan.release_options import ReleaseOptions

__all__ = ["Planned", "PlannedTables", "Report", "ReportError", "describe_error", "prepare"]


class ReportError(PrivframeError):
    """A report failed while releasing: ``charged`` lists the ledger labels it did charge."""

    def __init__(self, message: str, charged: Sequence[str]) -> None:
        super().__init__(message)
        self.charged = tuple(charged)


def describe_error(err: BaseException) -> str:
    """An error's type and message, unless the message might quote private data.

    privframe's own errors never carry data values and OS errors name paths;
    any other message (a polars parse error, say) may quote a value from the
    data, so only its type is shown.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.report import describe_error
        >>> describe_error(pf.InvalidValueError("bad bound"))
        'InvalidValueError: bad bound'
        >>> describe_error(KeyError("alice@example.com"))
        'KeyError (message withheld: it may quote private values)'
    """
    if isinstance(err, PrivframeError | OSError):
        return f"{type(err).__name__}: {err}"
    return f"{type(err).__name__} (message withheld: it may quote private values)"


Releasable = Query | SQLQuery
"""A report's query: built from the spec's structured form, or parsed from its SQL."""


@dataclass(frozen=True)
class Planned:
    """A query of a report, built and explained: what will be released and what it costs."""

    spec: QuerySpec
    query: Releasable
    explanation: Explanation

    @property
    def cost(self) -> Spendable:
        """What the release will charge: ρ (and δ), or ε (and δ), by the session's kind."""
        return self.explanation.plan.cost


@dataclass(frozen=True)
class PlannedTables:
    """A ``[[marginals]]`` or ``[[synthetic]]`` entry, explained: what it measures and costs.

    Its release is one ``Session.marginals`` or ``Session.synthesize`` call
    with the entry's arguments, charged in its own ledger entry.
    """

    spec: MarginalsSpec | SyntheticSpec
    explained: Explained

    @property
    def cost(self) -> Spendable:
        """What the call will charge: ρ, or ε in a pure-DP report."""
        return self.explained.cost

    def explain(self) -> str:
        """What it measures, in words."""
        return str(self.explained)


def explain_tables(sess: Session, entry: MarginalsSpec | SyntheticSpec) -> Explained:
    """The Session's explanation of an entry's call: it reads no data and spends nothing."""
    if isinstance(entry, MarginalsSpec):
        return sess.explain_marginals(
            list(entry.sets),
            entry.rho,
            epsilon=entry.epsilon,
            domains=entry.domains,
            max_rows=entry.max_rows,
        )
    return sess.explain_synthesis(
        entry.rho,
        epsilon=entry.epsilon,
        method=entry.method,
        columns=entry.columns,
        workload=entry.workload,
        domains=entry.domains,
        max_rows=entry.max_rows,
    )


def _release_tables(
    sess: Session, entry: MarginalsSpec | SyntheticSpec, label: str
) -> tuple[Frame, ...]:
    """The entry's Session call, charged in one ledger entry: its tables, one per file."""
    if isinstance(entry, MarginalsSpec):
        released = sess.marginals(
            list(entry.sets),
            entry.rho,
            epsilon=entry.epsilon,
            domains=entry.domains,
            max_rows=entry.max_rows,
            label=label,
        )
        return tuple(released[columns] for columns in entry.sets)
    table = sess.synthesize(
        entry.rho,
        epsilon=entry.epsilon,
        method=entry.method,
        columns=entry.columns,
        workload=entry.workload,
        rows=entry.rows,
        domains=entry.domains,
        max_rows=entry.max_rows,
        label=label,
    )
    return (table,)


def _session(spec: ReportSpec, ledger: Path | None) -> Session:
    """The session over the spec's data; SQL queries take their bounds, keys and limits from it."""
    if spec.data is None or spec.budget is None:  # a spec without a dataset has both
        raise SpecError("the spec names neither a data file and budget nor a server's dataset")
    metadata = {column: Column(**facts) for column, facts in spec.metadata.items()}
    rng = None if spec.seed is None else SeededRandomness(spec.seed)
    try:
        return Session(
            spec.data,
            spec.privacy_unit,
            spec.budget,
            ledger,
            rng=rng,
            metadata=metadata,
            contributions=Bound(**spec.contributions),
            same_data=spec.same_data,
        )
    except PrivframeError as err:
        raise SpecError(f"cannot open the data and its ledger: {err}") from None


def _build(sess: Session | RemoteSession, spec: ReportSpec, query: QuerySpec) -> Releasable:
    if query.sql is not None:
        return sess.parse_sql(query.sql)
    built: Query = sess.query().bound(**spec.contributions)
    if query.group_by:
        built = built.group_by(list(query.group_by), keys=query.keys)
    return built.agg(*query.aggregates)


def prepare(
    spec: ReportSpec,
    *,
    dry_run: bool = False,
    server: str | None = None,
    verify: bool | str = True,
    fits: bool = True,
) -> Report:
    """Open the session, build and explain every query, and check the whole report fits.

    Nothing is spent. A ledger file that does not exist yet is created only
    once every check has passed, and never by a dry run: a new file fixes the
    budget of the data, so a spec that fails its checks must not create one.
    A spec whose ``[data]`` names a ``dataset`` runs on the privframe server
    at ``server`` (``privframe report --server URL``), with the token in
    ``PRIVFRAME_TOKEN`` and ``verify`` as :func:`~privframe.connect` takes it.
    ``fits=False`` (a plan, never a run) skips the check that the report fits
    what the ledger has left.

    Raises:
        SpecError: the data or ledger (or the server's dataset) cannot be
            opened, or a query does not build or plan (all such queries are
            named).
        BudgetExceededError: the report's total cost does not fit what the
            ledger has left.
    """
    if spec.dataset is not None or server is not None:
        return _checked(spec, _remote(spec, server, verify), fits)
    fresh = spec.ledger is None or not spec.ledger.exists()
    # With no ledger file nothing was spent yet: the budget in memory answers the checks.
    report = _checked(spec, _session(spec, None if fresh else spec.ledger), fits)
    if fresh and not dry_run:
        report = _checked(spec, _session(spec, spec.ledger))
    return report


def _remote(spec: ReportSpec, server: str | None, verify: bool | str) -> RemoteSession:
    """The analyst's session on the server's dataset the spec names."""
    if spec.dataset is None:
        raise SpecError(
            "--server runs a spec whose [data] names the server's dataset (dataset = "
            '"..."); this spec reads a file: run it without --server'
        )
    if server is None:
        raise SpecError(
            f"this spec runs on a privframe server ([data] dataset = {spec.dataset!r}): "
            f"give --server URL, and the token in {TOKEN_ENV}"
        )
    try:
        sess = connect(server, spec.dataset, verify=verify)
    except PrivframeError as err:
        raise SpecError(f"cannot open the server's dataset {spec.dataset!r}: {err}") from None
    grant = sess.budget_kind
    if spec.spends_epsilon == issubclass(grant, zCDP):
        sess.close()
        spends, needs = ("epsilon", "rho") if spec.spends_epsilon else ("rho", "epsilon")
        raise SpecError(
            f"your grant on the server's dataset {spec.dataset!r} is a {grant.__name__} budget, "
            f"whose releases spend {needs}, and this spec's queries spend {spends}: write "
            f"{needs} = ... (or share = ...) in its queries"
        )
    return sess


def _checked(spec: ReportSpec, sess: Session | RemoteSession, fits: bool = True) -> Report:
    """The report over ``sess``, once every query plans and (if ``fits``) the total fits."""
    planned, problems = [], []
    for query in spec.queries:
        try:
            built = _build(sess, spec, query)
            built.check(with_error=True)  # what a release checks, as it runs with_error
            explanation = built.explain(query.rho, delta=query.delta, epsilon=query.epsilon)
            planned.append(Planned(query, built, explanation))
        except PrivframeError as err:
            problems.append(f"query {query.name!r}: {err}")
    for p in planned:
        if p.explanation.plan.selection is not None and p.spec.delta is None:
            # By default a selection spends all the delta left: the next run would have none.
            problems.append(
                f"query {p.spec.name!r} chooses its groups privately, which spends delta: "
                "give it delta = ... (a share of the budget's delta), or public keys"
            )
    tables = []
    entries: tuple[MarginalsSpec | SyntheticSpec, ...] = (*spec.marginals, *spec.synthetic)
    for entry in entries:
        kind = "marginals" if isinstance(entry, MarginalsSpec) else "synthetic"
        if not isinstance(sess, Session):
            problems.append(f"{kind} {entry.name!r}: a server's dataset releases queries only")
            continue
        try:
            tables.append(PlannedTables(entry, explain_tables(sess, entry)))
        except PrivframeError as err:
            problems.append(f"{kind} {entry.name!r}: {err}")
    if problems:
        raise SpecError("\n".join(problems))
    report = Report(spec, sess, tuple(planned), tuple(tables))
    if not fits:
        return report
    try:
        sess.check_cost(report.cost)
    except BudgetExceededError:
        left = sess.remaining
        raise BudgetExceededError(
            f"report {spec.title!r} needs {_cost(report.cost)} but {spec.spends_from} "
            f"has {_cost(left)} left; nothing was spent. "
            "Per entry: " + "; ".join(f"{p.spec.name} ({_cost(p.cost)})" for p in report.entries)
        ) from None
    return report


def _cost(cost: Spendable) -> str:
    """A cost as the run prints it: ``rho = 0.1, delta = 1e-07`` or ``epsilon = 0.1``."""
    if isinstance(cost, zCDP):
        return f"rho = {cost.rho:.6g}" + (f", delta = {cost.delta:.3g}" if cost.delta else "")
    delta = _delta(cost)
    return f"epsilon = {cost.epsilon:.6g}" + (f", delta = {delta:.3g}" if delta else "")


def _charge(cost: Spendable) -> str:
    """What a batch of ``cost`` charges, in words: an (ε, δ) ledger composes it tightly."""
    if isinstance(cost, ApproxDP):
        return f"at most {_cost(cost)} (the ledger composes its releases tightly)"
    return _cost(cost)


def _delta(cost: Spendable) -> float:
    """The δ of a cost: spent outright (zCDP) or the release's (ApproxDP); 0 for pure DP."""
    return 0.0 if isinstance(cost, PureDP) else cost.delta


def _total(costs: Sequence[Spendable]) -> Spendable:
    """Costs of one kind added up: what basic composition charges (zCDP and pure DP: exact)."""
    return functools.reduce(added, costs)


def _accounting(spec: ReportSpec) -> str:
    """How the report's guarantee is stated, for the dry run's summary."""
    kind = spec.spending.kind
    if kind == "pure":
        return "epsilon adds up (pure DP, basic composition)"
    if kind == "approx":
        return (
            "the ledger charges the tight composition of its releases, at most their "
            "epsilons and deltas added up"
        )
    if kind == "grant":
        return (
            "the server charges the grant's epsilon (pure DP: added up; (epsilon, delta): the "
            "tight composition, at most the sum)"
        )
    return f"the report states its guarantee by {spec.accounting} accounting"


@dataclass(frozen=True)
class Report:
    """A prepared report: its session and planned queries. Build it with :func:`prepare`."""

    spec: ReportSpec
    session: Session | RemoteSession
    planned: tuple[Planned, ...]
    tables: tuple[PlannedTables, ...] = ()
    created: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def entries(self) -> tuple[Planned | PlannedTables, ...]:
        """Every entry: the queries, then the marginals and synthetic tables."""
        return (*self.planned, *self.tables)

    @property
    def cost(self) -> Spendable:
        """The report's total cost: every entry's, added up.

        In an (ε, δ) report this is basic composition; the ledger charges the
        tight composition of its releases, which is never more.
        """
        return _total([p.cost for p in self.entries])

    @property
    def files(self) -> tuple[str, ...]:
        """The files the report writes beside ``report.html``, in order."""
        return tuple(f for p in self.entries for f in p.spec.files)

    def counted(self) -> str:
        """What the report releases, counted: ``3 queries, 1 marginals and 1 synthetic table``."""
        counts = (
            (len(self.planned), "query", "queries"),
            (len(self.spec.marginals), "marginals", "marginals"),
            (len(self.spec.synthetic), "synthetic table", "synthetic tables"),
        )
        parts = [f"{n} {one if n == 1 else many}" for n, one, many in counts if n]
        return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]

    def budget_plan(
        self,
        *,
        rho: Number | None = None,
        epsilon: Number | None = None,
        shares: Mapping[str, Number] | None = None,
        rows: float | Mapping[str, float] | None = None,
    ) -> BudgetPlan:
        """The report's budget plan (:func:`privframe.plan_budget`): every entry's intervals.

        By default at the spec's own split: its entries' budgets added up are
        the total, and each entry's over it its share. ``rho`` (or
        ``epsilon``), ``shares`` and ``rows`` are :func:`~privframe.plan_budget`'s.
        A synthetic table is planned for its cost alone: its rows carry no interval.
        """
        parameter = self.spec.spending.parameter
        items = [query_item(p.spec.name, p.query, parameter, p.spec.delta) for p in self.planned]
        items += [self._table_item(t.spec, parameter) for t in self.tables]
        amounts = {e.spec.name: getattr(e.spec, parameter) for e in self.entries}
        written = sum(amounts.values(), Fraction(0))
        asked = rho is not None or epsilon is not None
        total = total_of(parameter, rho, epsilon) if asked else written
        if shares is None:
            shares = {name: amount / written for name, amount in amounts.items()}
        left = self.session.remaining
        return plan_items(items, parameter, total, shares, rows, left=left)

    def _table_item(self, entry: MarginalsSpec | SyntheticSpec, parameter: str) -> PlanItem:
        """A marginals or synthetic entry as a plan item, explained at any amount."""
        sess = self.session
        assert isinstance(sess, Session)  # a server's dataset releases queries only

        def widths(amount: Fraction) -> tuple[tuple[str, Width], ...]:
            at: dict[str, Any] = {parameter: amount}
            return explain_tables(sess, dataclasses.replace(entry, **at)).widths

        kind = "marginals" if isinstance(entry, MarginalsSpec) else "synthetic table"
        return PlanItem(entry.name, widths, kind)

    @functools.cached_property
    def plan_section(self) -> str:
        """The page's plan (HTML): each output's interval at this run's split and against the total.

        Public parameters only; made once, before the run charges anything.
        """
        return self.budget_plan().html(
            heading=f"this run spends {_cost(self.cost)}, split over its entries as below: each "
            "output's 95% interval at its share, and against the total budget"
        )

    def plan_text(self) -> str:
        """The plan a dry run prints: each entry's explanation, the total and the budget left."""
        blocks = [f"== {p.spec.name}: {_cost(p.cost)} ==\n{p.explanation}" for p in self.planned]
        blocks += [f"== {t.spec.name}: {_cost(t.cost)} ==\n{t.explain()}" for t in self.tables]
        left = self.session.remaining
        blocks.append(
            f"== report {self.spec.title!r}: {self.counted()}, {_cost(self.cost)} "
            f"in total; the ledger has {_cost(left)} left; {_accounting(self.spec)} =="
        )
        return "\n\n".join(blocks)

    def summary(self) -> str:
        """What the report spends and what is then left, as ``privframe report`` prints it.

        A zCDP report reads ``rho = 0.4; the ledger '...' has rho = 0.6 left``;
        a pure-DP or (ε, δ) report gives ε (and δ), and an (ε, δ) report says
        that its sum is what the ledger's tight composition never exceeds.
        """
        cost, left = self.cost, self.session.remaining
        where = self.spec.spends_from
        if isinstance(cost, zCDP) and isinstance(left, zCDP):
            return f"rho = {cost.rho:.6g}; {where} has rho = {left.rho:.6g} left"
        composed = " (added up; the ledger charges their tight composition)"
        return (
            f"{_cost(cost)}{composed if isinstance(cost, ApproxDP) else ''}; {where} has "
            f"{_cost(left)} left"
        )

    def run(self, out: Path, progress: TextIO | None = None) -> Path:
        """Release every query all or nothing; write ``<name>.csv`` each and ``report.html``.

        Every query is first computed exactly (an error or Ctrl-C then spends
        nothing); then the report's whole cost is charged in one ledger step
        (so a concurrent job spends either before, and this run is refused,
        or after); then the noise is drawn and the outputs are written to a
        new folder beside ``out`` that replaces ``out`` once complete.
        Ctrl-C and SIGTERM wait while the charge and the writes run (they
        take moments): a charged report is always written whole. ``out``
        must be new, empty, or an earlier report's output (it is replaced
        whole, so no file of an older run is left among the new ones).

        One line per query goes to ``progress`` (stderr by default), and
        while the queries are computed :func:`privframe.progress.steps` shows
        "queries: i/n": a bar in a terminal, log events otherwise, nothing
        when turned off (:mod:`privframe.progress` says how). A
        seeded report's CSV files and page start with a :data:`NOT_PRIVATE`
        line (a ``#`` comment in CSV: read them with ``comment_prefix="#"``).
        Returns the path of ``report.html``.

        Raises:
            SpecError: ``out`` cannot hold the outputs (checked before anything).
            BudgetExceededError: another job spent from the ledger since the
                checks and the report no longer fits; nothing was charged.
            ReportError: computing failed or was interrupted (nothing was
                charged), or writing failed after the charge; ``charged``
                names exactly the queries the ledger was charged for.
        """
        stream = sys.stderr if progress is None else progress
        staging = report_output.staging_folder(out)
        refused = False
        try:
            # The page's plan, made before the charge: a failure there spends nothing.
            _ = self.plan_section
            batch = self._compute(stream)
            with _signals_deferred() as deferred:
                failure, charged = self._charge_and_write(batch, staging, out, stream)
        except BudgetExceededError:
            # The checks passed, so another job spent in between; nothing was charged.
            refused = True
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if refused:
            shutil.rmtree(staging, ignore_errors=True)
            raise self._refused()
        if failure is not None:
            raise self._failed(failure, charged, staging)
        if deferred:
            print(
                f"interrupted ({', '.join(deferred)}) while charging and writing: "
                "the report was completed first",
                file=stream,
                flush=True,
            )
        return out / "report.html"

    def _refused(self) -> BudgetExceededError:
        """The error of a run refused at its charge: another job spent since the checks."""
        return BudgetExceededError(
            f"report {self.spec.title!r} needs {_cost(self.cost)}, but another job spent "
            f"from {self.spec.spends_from} since the checks and "
            f"{_cost(self.session.remaining)} is left; nothing was spent"
        )

    def _failed(self, failure: str, charged: Sequence[str], staging: Path) -> ReportError:
        """The error of a run that failed after its checks, naming what the ledger was charged."""
        title = self.spec.title
        if len(charged) == len(self.entries):
            return ReportError(
                f"report {title!r}: every entry was released and charged "
                f"({', '.join(charged)}), but writing the outputs failed: {failure}. "
                f"What was written is in {str(staging)!r}.",
                charged,
            )
        kept = ""
        if any(staging.iterdir()):
            kept = f" What it released before is in {str(staging)!r}."
        else:
            shutil.rmtree(staging, ignore_errors=True)
        return ReportError(
            f"report {title!r} stopped while releasing: {failure.rstrip('.')}. Charged to the "
            f"ledger: {', '.join(charged) or 'nothing'}.{kept}",
            charged,
        )

    def _charge_and_write(
        self, batch: Batch | RemoteBatch | None, staging: Path, out: Path, stream: TextIO
    ) -> tuple[str | None, list[str]]:
        """Release the marginals and synthetic tables, then ``batch``, then write the outputs.

        Each marginals or synthetic entry is one Session call, charged in its
        own ledger entry; the queries' ``batch`` is charged in one step after
        them. Returns what failed, if anything, and the ledger labels charged.
        An error before any charge propagates: a :class:`BudgetExceededError`
        then means nothing was charged. A later failure is returned as text,
        not raised: the caller raises its :class:`ReportError` outside any
        handler, as the original error may quote private values.
        """
        made: list[tuple[Frame, ...]] = []
        seeded = self.spec.seed is not None
        before = len(self._local().ledger) if self.tables else 0
        try:
            for t in self.tables:
                print(f"{t.spec.name}: charging {_cost(t.cost)} ...", file=stream, flush=True)
                made.append(_release_tables(self._local(), t.spec, self.spec.label(t.spec)))
                # Written at once: if a later entry fails, what this one released is kept.
                for file, frame in zip(t.spec.files, made[-1], strict=True):
                    report_output.write_table(frame, staging / file, seeded=seeded)
            if batch is not None:
                print(f"charging {_charge(batch.cost)} to the ledger in one step", file=stream)
            results = batch.release() if batch is not None else []
        except (Exception, KeyboardInterrupt) as err:
            charged = self._charged(before)
            if not charged:
                raise
            failure = (
                f"another job spent from {self.spec.spends_from} since the checks"
                if isinstance(err, BudgetExceededError)
                else describe_error(err)
            )
            return failure, charged
        entries = self._local().ledger[before:] if self.tables else ()
        mine = {self.spec.label(t.spec) for t in self.tables}
        charged_entries = [e for e in entries if e.label in mine]
        charged_entries += batch.entries if batch is not None else []
        labels = [self.spec.label(p.spec) for p in self.entries]
        try:
            self._write(staging, out, results, made, charged_entries, stream)
        except (Exception, KeyboardInterrupt) as err:
            return describe_error(err), labels
        return None, labels

    def _charged(self, before: int) -> list[str]:
        """This run's ledger labels among the entries recorded since entry ``before``.

        A report without marginals or synthetic tables charges in one step: none.
        """
        if not self.tables:
            return []
        labels = {self.spec.label(p.spec) for p in self.entries}
        return [e.label for e in self._local().ledger[before:] if e.label in labels]

    def _local(self) -> Session:
        """The local Session, which alone makes marginals and synthetic tables."""
        if not isinstance(self.session, Session):
            raise SpecError("a server's dataset releases queries only")
        return self.session

    def _options(self, planned: Planned) -> ReleaseOptions:
        """A query's release options: its spec's post-processing, with errors, labelled."""
        return ReleaseOptions(
            with_error=True,
            label=self.spec.label(planned.spec),
            delta=_delta(planned.cost) or None,
            **dataclasses.asdict(planned.spec.post),
        )

    def _compute(self, stream: TextIO) -> Batch | RemoteBatch | None:
        """Every query computed exactly, nothing charged; failures become ReportErrors.

        :meth:`Session.batch` shows "queries: step i of n" (a bar in a terminal) as
        each is computed. None for a report without queries.
        """
        n = len(self.planned)
        if not n:
            return None
        print(f"computing {n} queries (nothing is charged yet) ...", file=stream, flush=True)
        failure = None
        try:
            batch = self.session.batch(
                [
                    p.query.request_with(p.spec.rho, self._options(p), epsilon=p.spec.epsilon)
                    for p in self.planned
                ]
            )
        except BudgetExceededError:
            raise
        except (Exception, KeyboardInterrupt) as err:
            failure = describe_error(err)
        if failure is not None:
            # Raised outside the handler: the original may quote private values.
            raise ReportError(
                f"report {self.spec.title!r} stopped while computing its queries: "
                f"{failure.rstrip('.')}. Charged to the ledger: nothing.",
                (),
            )
        return batch

    def _write(
        self,
        staging: Path,
        out: Path,
        results: Sequence[Frame],
        made: Sequence[tuple[Frame, ...]],
        entries: Sequence[LedgerEntry],
        stream: TextIO,
    ) -> None:
        """Write every output into ``staging``, then put it in place of ``out``."""
        seeded = self.spec.seed is not None
        sections = []
        for i, (p, result) in enumerate(zip(self.planned, results, strict=True), 1):
            report_output.write_csv(result, staging / p.spec.files[0], seeded=seeded)
            sections.append(_section(p, self.spec.label(p.spec), result))
            print(f"[{i}/{len(self.planned)}] {p.spec.name}: {_cost(p.cost)} ... done", file=stream)
        tables = []
        for i, (t, frames) in enumerate(zip(self.tables, made, strict=True), 1):
            tables.append(self._tables_html(i, t, frames))
            print(f"{t.spec.name}: {_cost(t.cost)} ... done", file=stream)
        page = report_html(
            self.spec.title,
            self.created,
            sections,
            self.session.report(),
            entries,
            accounting=self.spec.accounting,
            tables=tables,
            plan=self.plan_section,
        )
        note = f"privframe report {self.spec.title!r}, charged {_cost(self.cost)}"
        report_output.publish(staging, out, page, seeded=seeded, note=note)

    def _tables_html(self, index: int, planned: PlannedTables, frames: Sequence[Frame]) -> str:
        """The page's section of a marginals or synthetic entry."""
        entry = planned.spec
        summary = f"cost {_cost(planned.cost)}; ledger label {self.spec.label(entry)!r}"
        if isinstance(entry, MarginalsSpec):
            tables = list(zip(entry.sets, entry.files, frames, strict=True))
            return report_output.marginals_html(
                index, entry.name, summary, planned.explain(), tables
            )
        rows = len(frames[0])
        summary = (
            f"a synthetic table of {rows} rows by {entry.method.upper()}, columns "
            f"{', '.join(map(str, frames[0].columns))}; {summary}"
        )
        return report_output.synthetic_html(
            index, entry.name, summary, planned.explain(), entry.files[0]
        )


@contextlib.contextmanager
def _signals_deferred() -> Iterator[list[str]]:
    """Hold Ctrl-C and SIGTERM until the block ends; yields the names of those received.

    Only the main thread can set signal handlers; elsewhere nothing is deferred.
    """
    received: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def record(signum: int, frame: object) -> None:
        received.append(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, record) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _section(planned: Planned, label: str, result: pl.DataFrame | pd.DataFrame) -> ReportSection:
    query = planned.query
    return ReportSection(
        name=planned.spec.name,
        label=label,
        query=query.query if isinstance(query, SQLQuery) else query,
        explanation=planned.explanation,
        result=result,
        sql=planned.spec.sql,
    )
