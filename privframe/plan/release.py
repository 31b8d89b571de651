"""The release pipeline: plan → engine spec → exact aggregates → charge → noise → estimates.

Every release, SQL query and report section goes through :class:`Pipeline`,
in this order, so that budget comes before bytes:

1. **plan** (:func:`~privframe.plan.planner.plan_release`): limits, each
   measurement's sensitivity and σ, the cost; refused if it does not fit;
2. **spec** (:meth:`Pipeline.spec`): what the engine computes, with every
   privacy decision made (:mod:`privframe.engines.spec`);
3. **engine**: the exact bounded aggregates, never shown; any engine failure
   is refused without its message, which may quote private values;
4. **charge** (:meth:`Pipeline.charge`): the accountant records a batch's
   total in one ledger step (:mod:`privframe.accounting.accountant`);
5. **noise** (:meth:`Pipeline.noisy`): key selection, discrete Gaussian or
   discrete Laplace vectors (:mod:`privframe.mechanisms.draws`) and the
   quantiles' exponential mechanism, only after the charge;
6. **estimate**: each aggregate turns the noisy measurements into its output
   columns (:meth:`~privframe.plan.aggregates.base.Aggregate.estimate`), then
   the release's post-processing: clamping, intervals, a total row
   (:mod:`privframe.plan.postprocess`).

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
    >>> sess.query().agg(pf.count()).release(0.5).columns, sess.spent.rho
    (['count'], 0.5)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np
import polars as pl

from privframe._arguments import RHO_HINTS
from privframe.accounting._kinds import Spendable, columns
from privframe.accounting.accountant import Accountant, Spend
from privframe.accounting.budgets import ApproxDP, zCDP
from privframe.accounting.events import (
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    ThresholdEvent,
    ZCDPEvent,
)
from privframe.accounting.ledger import LedgerEntry
from privframe.engines.contributions import ContributionSpec, SupportsContributions
from privframe.engines.inputs import PanicException
from privframe.engines.spec import DISTINCT, AggregationSpec, Engine, PrivateJoin, RowStep, Step
from privframe.errors import (
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    PrivframeError,
)
from privframe.mechanisms.draws import NoiseDraw, noise_vectors
from privframe.mechanisms.noise import Randomness, SystemRandomness, discrete_gaussian
from privframe.numeric import Number, round_down
from privframe.numeric import exact as exact_number
from privframe.plan import auto_bounds
from privframe.plan.aggregates.quantile import choose_quantiles, histogram_specs
from privframe.plan.ir import Plan
from privframe.plan.keys import exact_keys
from privframe.plan.measurements import Measurement
from privframe.plan.planner import (
    ReleasePlan,
    Selection,
    plan_approx_release,
    plan_pure_release,
    plan_release,
    selects,
)
from privframe.plan.postprocess import estimate_outputs
from privframe.plan.release_options import ReleaseOptions
from privframe.plan.split import Balance
from privframe.plan.tuning import TuningDesign, read

__all__ = ["Batch", "Computed", "Pipeline", "added", "asked_budget", "describe", "zero_cost"]


def added(total: Spendable, cost: Spendable) -> Spendable:
    """``total + cost``, two budgets of one session's kind.

    Example:
        >>> import privframe as pf
        >>> added(pf.PureDP(0.5), pf.PureDP(0.25))
        PureDP(epsilon=0.75)
    """
    if type(total) is not type(cost):
        raise InvalidBudgetError(
            f"a batch's costs are of one kind; got {type(total).__name__} and {type(cost).__name__}"
        )
    return total + cost  # type: ignore[operator]  # both are of one type, checked above


def asked_budget(
    kind: type[Spendable],
    rho: Number | None,
    epsilon: Number | None,
    *,
    whose: str,
    not_epsilon: str,
) -> Number:
    """The budget a release asks for in its ``kind``'s parameter; the other one, or none, refused.

    A zCDP budget's releases spend ``rho``; pure-DP and (ε, δ) budgets'
    spend ``epsilon``. ``whose`` names the budget for the messages ("this
    session's budget is PureDP(epsilon=1.0)"); ``not_epsilon`` is the refusal
    of ``epsilon`` for a zCDP one.

    Raises:
        InvalidArgumentError: the other parameter was given, or none.

    Example:
        >>> import privframe as pf
        >>> asked_budget(pf.PureDP, None, 0.5, whose="the budget", not_epsilon="")
        0.5
    """
    if issubclass(kind, zCDP):
        if epsilon is not None:
            raise InvalidArgumentError(not_epsilon)
        if rho is None:
            raise InvalidArgumentError(f"a release needs a budget: {RHO_HINTS['rho']}")
        return rho
    if rho is not None:
        raise InvalidArgumentError(
            f"{whose}: a release spends epsilon=..., not rho, e.g. release(epsilon=0.1); "
            "sess.remaining.epsilon shows what is left"
        )
    if epsilon is None:
        raise InvalidArgumentError(
            f"a release needs a budget: {whose}, so pass epsilon=..., e.g. "
            "release(epsilon=0.1); sess.remaining.epsilon shows what is left"
        )
    return epsilon


def zero_cost(kind: type[Spendable]) -> Spendable:
    """The zero budget of a session's ``kind``, to add a batch's costs to.

    Example:
        >>> import privframe as pf
        >>> zero_cost(pf.PureDP)
        PureDP(epsilon=0.0)
    """
    return kind(0)


@dataclass(frozen=True, eq=False)
class Computed:
    """A request planned and aggregated exactly: what its charge and its noise need."""

    plan: Plan
    release: ReleasePlan
    exact: pl.DataFrame
    options: ReleaseOptions
    finish: Callable[[pl.DataFrame], pl.DataFrame] | None
    auto_bounds: Mapping[str, Any] | None = None  # the bounds chosen at release, if any


class Pipeline:
    """One session's release pipeline: its engine, accountant, privacy unit and noise source.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.accounting.accountant import Accountant
        >>> from privframe.engines.polars import PolarsEngine
        >>> from privframe.plan.ir import Plan
        >>> pipeline = Pipeline(
        ...     PolarsEngine(pl.LazyFrame({"x": [1.0]})), Accountant(pf.zCDP(1.0)), None, None
        ... )
        >>> pipeline.plan(Plan(aggregates=(pf.count(),)), 0.5, None, None, pf.zCDP(0)).cost
        zCDP(rho=0.5, delta=0.0)
    """

    def __init__(
        self, engine: Engine, accountant: Accountant, unit: str | None, rng: Randomness | None
    ) -> None:
        self.engine = engine
        self.accountant = accountant
        self.unit = unit
        self.rng = rng

    def selection_delta(self, plan: Plan, delta: Number | None) -> Number | None:
        """The δ a release spends on choosing its groups: given, or what the session has left.

        A plan chooses groups privately when a group column has no public keys
        (:func:`~privframe.plan.planner.selects`), even if others have.
        """
        if not selects(plan):
            if delta:
                raise InvalidValueError(
                    "delta is only spent by queries that choose groups privately "
                    "(group_by columns without public keys); this query spends rho alone"
                )
            return None
        if delta is None:
            remaining = self.accountant.remaining
            assert isinstance(remaining, zCDP)  # selection_delta plans zCDP releases
            delta = remaining.exact_delta
        if not delta:
            raise InvalidBudgetError(
                f"choosing groups privately (group_by columns {list(plan.selected)} without "
                f"public keys) spends delta, and this session's budget "
                f"{_no_delta(self.accountant)}."
            )
        return delta

    def plan(
        self,
        plan: Plan,
        rho: Number,
        weights: Mapping[str, float] | Balance | None,
        delta: Number | None,
        before: Spendable,
    ) -> ReleasePlan:
        """Plan a release at ``rho`` after ``before`` (the batch so far); refuse what cannot fit.

        ``rho`` is the budget in the session's first parameter: ρ for a zCDP
        session, ε for a pure-DP or an (ε, δ) one (:meth:`asked` reads it).
        Under (ε, δ)-DP ``delta`` is the release's δ (0 if None). A request
        over what is left by float rounding only spends exactly what is left,
        after what the requests before it in the batch spend.
        """
        release = self.planned(plan, rho, weights, delta, before)
        if before == zero_cost(type(before)):
            # Alone, its mechanisms (events) let an (ε, δ) session compose it tightly.
            self.accountant.check(release.cost, description=describe(plan, release))
        else:
            self.accountant.check(added(before, release.cost))
        release.warn_if_drowned()
        return release

    def planned(
        self,
        plan: Plan,
        rho: Number,
        weights: Mapping[str, float] | Balance | None,
        delta: Number | None,
        before: Spendable,
    ) -> ReleasePlan:
        """:meth:`plan` without the check that it fits (for ``explain``)."""
        has_unit = self.unit is not None
        budget = self.accountant.budget
        zcdp = isinstance(budget, zCDP)
        if zcdp:
            delta = self.selection_delta(plan, delta)
        spent = columns(before)[0]  # ρ, or ε
        asked = exact_number("rho" if zcdp else "epsilon", rho, positive=True)
        left = self.accountant.affordable(spent + asked) - spent
        if zcdp:
            return plan_release(plan, has_unit, left, weights, delta)
        if isinstance(budget, ApproxDP):
            return plan_approx_release(plan, has_unit, left, delta or 0, weights)
        if delta:
            raise InvalidValueError(
                "a pure-DP session (a PureDP budget) spends no delta: release with epsilon=... "
                "alone"
            )
        return plan_pure_release(plan, has_unit, left, weights)

    def asked(self, rho: Number | None, epsilon: Number | None) -> Number:
        """The budget a release asks for, in its session's parameter; the other is refused.

        A zCDP session's releases spend ``rho``; pure-DP and (ε, δ) sessions'
        spend ``epsilon``.

        Raises:
            InvalidArgumentError: the other parameter was given, or none.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.PureDP(1.0))
            >>> try:
            ...     sess.query().agg(pf.count()).release(rho=0.5)
            ... except TypeError as err:
            ...     print(str(err)[:62])
            this session's budget is PureDP(epsilon=1.0): a release spends
        """
        budget = self.accountant.budget
        return asked_budget(
            type(budget),
            rho,
            epsilon,
            whose=f"this session's budget is {budget!r}",
            not_epsilon=RHO_HINTS["epsilon"],
        )

    def aggregate(self, spec: AggregationSpec) -> pl.DataFrame:
        """The engine's exact aggregates; a failure is refused without its message."""
        return _withheld(
            lambda: self.engine.aggregate(spec),
            "the query failed while running on the data",
            "Check that filters are boolean expressions that keep one value per row. ",
        )

    def measure_contributions(
        self, tuning: TuningDesign, spec: ContributionSpec, label: str, description: dict
    ) -> dict[str, np.ndarray]:
        """``tune``'s noisy histograms, budget before bytes: check, read, charge, then noise.

        The budget is checked before the engine reads anything, the exact
        histograms are computed before the charge (a failure charges nothing),
        and the discrete Gaussian is drawn only after it, one ledger entry for
        ``tuning.cost``.

        Raises:
            BudgetExceededError: the cost does not fit; nothing is read.
            InvalidValueError: the engine cannot summarise contributions, or
                failed while reading (its message withheld); nothing is charged.
        """
        engine = self.engine
        if not isinstance(engine, SupportsContributions):
            raise InvalidValueError(
                "tune runs on the polars engine (pandas or polars frames, LazyFrames, parquet "
                "or CSV files) and on Spark DataFrames; this session's engine cannot summarise "
                "contributions: tune on a Session over a polars or Spark copy of the data with "
                "the same budget ledger, or choose the limits by hand"
            )
        self.accountant.check(tuning.cost)
        tables = _withheld(lambda: engine.contributions(spec), "tune failed while reading the data")
        seeded = self.rng is not None and self.rng.seeded
        self.accountant.spend_all([Spend(tuning.cost, label, description, seeded)])
        return {
            piece.name: piece.counts(tables)
            + discrete_gaussian(piece.sigma_units, piece.bins, rng=self.rng)
            for piece in tuning.pieces
        }

    def choosing_bounds(self, rho: Number) -> Fraction:
        """The ρ a release that chooses its bounds spends; refused outside zCDP sessions.

        Raises:
            InvalidValueError: the session's budget is not zCDP.
        """
        if not isinstance(self.accountant.budget, zCDP):
            raise auto_bounds.not_zcdp(self.accountant.budget)
        return self.accountant.affordable(rho)

    def choose_bounds(
        self,
        plan: Plan,
        rho: Number,
        options: ReleaseOptions,
        schema: pl.Schema,
        before: Spendable,
    ) -> tuple[Plan, Fraction, dict[str, Any]]:
        """Choose the ``bounds="auto"`` bounds: the plan with them, the rest of ρ, the record.

        Budget before bytes (:mod:`privframe.plan.auto_bounds`): the whole
        ``rho`` must fit after ``before`` and the release must plan at the rest
        (with stand-in bounds) before anything is read; then the values
        histograms are charged as their own ledger entry and drawn, and the
        bounds read from them, post-processing only: with public groups by
        ``tune``'s error model at the rest of ρ, from ApproxBounds' bounds,
        with groups chosen privately by ApproxBounds
        (:func:`~privframe.plan.auto_bounds.resolve`).

        Raises:
            InvalidValueError: the session's budget is not zCDP, or no bounds
                could be chosen (after the histograms were charged).
            BudgetExceededError: ``rho`` does not fit; nothing is read.
        """
        share, rest = auto_bounds.split(plan, self.choosing_bounds(rho))
        after = added(before, zCDP(share))
        placeholder = self.plan(plan, rest, options.weights, options.delta, after)
        design = auto_bounds.design(plan, self.unit is not None, share)
        spec = design.contribution_spec(self.spec(plan, placeholder, schema))
        label = f"{options.label}: bounds" if options.label else "bounds"
        stated = str(auto_bounds.share_of(plan))
        description = {
            **design.describe(),
            "auto_bounds": {"share": stated, "release_rho": float(rest)},
        }
        estimates = read(design, self.measure_contributions(design, spec, label, description))

        def plannable(candidate: Plan) -> bool:
            try:
                self.planned(candidate, rest, options.weights, options.delta, before)
            except PrivframeError:
                return False
            return True

        resolved, chosen = auto_bounds.resolve(plan, estimates, plannable, rest, options.weights)
        record = {
            "share": stated,
            "bounds_rho": float(share),
            "chosen": {name: list(pair) for name, pair in chosen.items()},
        }
        return resolved, rest, record

    def spec(self, plan: Plan, release: ReleasePlan, schema: pl.Schema) -> AggregationSpec:
        """What the engine computes for ``release``, every privacy decision made."""
        keys, steps = None, plan.steps
        if plan.keys is not None:
            keys = exact_keys(plan.keys.to_polars(), schema)
            if plan.other is not None:
                keys, steps = _with_other(keys, steps, plan.other)
        values = []
        for i, m in enumerate(release.measurements):
            spec = m.need.value_spec(m, value_column(i))
            if spec is not None:
                values.append(spec)
        limits, n_groups = release.limits, plan.n_groups
        return AggregationSpec(
            steps=steps,
            unit=self.unit,
            group_by=plan.group_by,
            keys=keys,
            # Without public keys a unit may be in any number of groups: always bound them.
            max_groups=None
            if n_groups is not None and limits.max_groups >= n_groups
            else limits.max_groups,
            max_rows_per_group=limits.max_rows_per_group,
            max_rows=limits.max_rows,
            values=tuple(values),
            seed=int((self.rng or SystemRandomness()).words(1)[0]),
            histograms=tuple(histogram_specs(release.quantiles).values()),
            table=plan.table,
        )

    def charge(self, computed: Sequence[Computed]) -> list[LedgerEntry]:
        """Record a computed batch's spends in one atomic ledger step."""
        seeded = self.rng is not None and self.rng.seeded
        return self.accountant.spend_all(
            [
                Spend(
                    c.release.cost,
                    label=c.options.label,
                    description={
                        **describe(c.plan, c.release),
                        **({} if c.auto_bounds is None else {"auto_bounds": dict(c.auto_bounds)}),
                    },
                    seeded=seeded,
                )
                for c in computed
            ]
        )

    def noisy(self, computed: Computed) -> pl.DataFrame:
        """The charged release's noisy table, post-processed by each aggregate's estimate."""
        release, exact = computed.release, computed.exact
        if release.selection is not None:
            exact = self._selected(exact, computed.plan.selected, release.selection)
        draws = noise_vectors(
            [NoiseDraw(m.family, m.scale_units) for m in release.measurements],
            exact.height,
            self.rng,
        )
        noisy = {
            m.key: exact[m.need.exact_column(value_column(i))].to_numpy().astype(np.int64) + draw
            for i, (m, draw) in enumerate(zip(release.measurements, draws, strict=True))
        }
        noisy.update(choose_quantiles(release.quantiles, exact, self.rng))
        outputs, totals = estimate_outputs(
            release, noisy, computed.options.with_error, computed.options.post
        )
        columns: dict[str, Any] = {c: exact[c] for c in computed.plan.group_by}
        result = pl.DataFrame(columns | outputs)
        if totals is not None:
            # Null group keys; outputs that do not add up (NaN placeholders) are null too.
            total = pl.DataFrame(totals).fill_nan(None)
            keys = pl.DataFrame({c: [None] for c in computed.plan.group_by})
            total = pl.concat([keys, total], how="horizontal").cast(result.schema)
            result = pl.concat([result, total])
        return computed.finish(result) if computed.finish is not None else result

    def _selected(
        self, exact: pl.DataFrame, selected: tuple[str, ...], selection: Selection
    ) -> pl.DataFrame:
        """The rows whose combination of the ``selected`` columns passes the threshold.

        One noise draw per combination (the engine repeats its distinct-unit
        count on each of its rows, one per public key of the other group
        columns): a combination and all its rows are kept iff its noisy count
        reaches the threshold. Only the kept groups' aggregates get noise and
        leave the session; the noisy distinct counts themselves are not released.
        """
        combinations = exact.select(*selected, DISTINCT).unique(selected, maintain_order=True)
        distinct = combinations[DISTINCT].to_numpy().astype(np.int64)
        sigma = selection.measurement.sigma_units
        noisy = distinct + discrete_gaussian(sigma, distinct.size, rng=self.rng)
        if combinations.height == exact.height:  # as in a plain selection: a draw per row
            return exact.filter(noisy >= selection.threshold)
        kept = combinations.filter(noisy >= selection.threshold).drop(DISTINCT)
        return exact.join(kept, on=list(selected), how="semi", maintain_order="left")


class Batch:
    """Releases computed exactly and not yet charged: :meth:`Session.batch` makes one.

    Holds the exact aggregates privately; only :meth:`release` turns them
    into noisy tables, after charging the batch's total cost atomically.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
        >>> batch = sess.batch([sess.query().agg(pf.count()).request(0.5, label="n")])
        >>> batch
        Batch(labels=['n'], cost=zCDP(rho=0.5, delta=0.0), released=False)
    """

    def __init__(
        self,
        pipeline: Pipeline,
        computed: Sequence[Computed],
        convert: Callable[[pl.DataFrame], Any],
    ) -> None:
        self._pipeline = pipeline
        self._computed = list(computed)
        self._convert = convert
        self._entries: list[LedgerEntry] | None = None

    @property
    def labels(self) -> list[str]:
        """The requests' ledger labels, in order."""
        return [c.options.label for c in self._computed]

    @property
    def cost(self) -> Spendable:
        """What :meth:`release` charges: every request's cost, added up."""
        zero = zero_cost(type(self._pipeline.accountant.budget))
        return functools.reduce(added, (c.release.cost for c in self._computed), zero)

    @property
    def entries(self) -> list[LedgerEntry]:
        """The ledger entries :meth:`release` recorded (empty before it)."""
        return list(self._entries or ())

    def release(self) -> list[Any]:
        """Charge the total in one ledger step, then draw the noise; once only.

        Returns the noisy tables in the session's kind of frame (pandas,
        polars or Spark), in the order of the requests.

        Raises:
            BudgetExceededError: the total no longer fits (another process
                spent meanwhile); nothing is charged.
            InvalidArgumentError: the batch was released already.
        """
        if self._entries is not None:
            raise InvalidArgumentError(
                "this batch was released already: its budget is spent; make a new one"
            )
        self._entries = self._pipeline.charge(self._computed)
        return [self._convert(self._pipeline.noisy(c)) for c in self._computed]

    def __repr__(self) -> str:
        return (
            f"Batch(labels={self.labels!r}, cost={self.cost!r}, "
            f"released={self._entries is not None})"
        )


T = TypeVar("T")


def _withheld(compute: Callable[[], T], what: str, advice: str = "") -> T:
    """``compute()``; any failure refused as ``what``, without its message."""
    failure = None
    try:
        result = compute()
    except (Exception, PanicException) as err:
        failure = type(err).__name__
    if failure is not None:
        # Any engine failure (polars errors and panics, Spark, memory) may depend on
        # the data and its message may quote private values: withhold it, and raise
        # outside the handler so the original is not kept as the error's context.
        raise InvalidValueError(
            f"{what} (the engine raised {failure}; its message is withheld because it may "
            f"contain private values). {advice}Nothing was charged."
        )
    return result


def value_column(index: int) -> str:
    """The engine's working column of the measurement at ``index`` ('__' names are reserved)."""
    return f"__value{index}"


def _no_delta(accountant: Accountant) -> str:
    """Why a session cannot choose groups privately, and what to do instead."""
    budget = accountant.budget
    assert isinstance(budget, zCDP)  # pure-DP and (ε, δ) sessions say what to do themselves
    if budget.delta:
        why = "has none left"
        fix = (
            "open a new budget (and give earlier selections a share with "
            "release(..., delta=...): by default a selection spends all the delta left)"
        )
    else:
        why = "has no delta (an ApproxDP budget given as is converts all of its delta to rho)"
        fix = (
            "reserve some when opening the session, e.g. budget=pf.ApproxDP(epsilon, "
            "delta).to_zcdp(selection_delta=delta / 10), or budget=pf.zCDP(rho=1.0, "
            "delta=1e-7)"
        )
    return f"{why}. Pass public keys, which spend no delta: group_by(..., keys=[...]); or {fix}"


def _with_other(
    keys: pl.DataFrame, steps: tuple[Step, ...], other: str
) -> tuple[pl.DataFrame, tuple[Step, ...]]:
    """Route rows with a non-public (or null) key to the public ``other`` group, last."""
    (column,) = keys.columns
    labels = keys[column].cast(pl.String).to_list()
    value = pl.col(column).cast(pl.String, strict=False)
    route = pl.when(value.is_in(labels)).then(value).otherwise(pl.lit(other)).alias(column)
    keys = pl.concat([keys.cast({column: pl.String}), pl.DataFrame({column: [other]})])
    return keys, (*steps, RowStep("with_columns", (route,)))


def _multiplier(m: Measurement) -> float:
    """The noise multiplier (scale over the calibrating sensitivity) rounded down.

    An event claims no more noise than was drawn: an (ε, δ) session's
    accountant composes releases by their events.
    """
    return round_down(Fraction(m.scale_units) / Fraction(m.sensitivity_units))


def _events(release: ReleasePlan, n_groups: int | None) -> list[dict[str, Any]]:
    """The release's mechanisms as versioned events (privframe.accounting.events), for replaying.

    Each noisy measurement is a discrete Gaussian with noise multiplier σ/Δ₂,
    or a discrete Laplace with noise multiplier b/Δ₁ (grid units), and, with
    public keys, one value per group as its dimension; a private key
    selection adds its counts (dimension not public) and a threshold event
    with the δ it spends; a quantile is a ρ-zCDP event, or an ε-DP one under
    pure DP.
    """
    events: list[Any] = [
        GaussianEvent(_multiplier(m), discrete=True, dimension=n_groups)
        if m.family == "gaussian"
        else LaplaceEvent(_multiplier(m), discrete=True, dimension=n_groups)
        for m in release.measurements
    ]
    if release.selection is not None:
        events.append(GaussianEvent(_multiplier(release.selection.measurement), discrete=True))
        events.append(ThresholdEvent(rho=0.0, delta=release.selection.delta))
    events += [
        ZCDPEvent(float(q.exact_share))
        if q.share.family == "gaussian"
        else PureDPEvent(float(q.exact_share))
        for q in release.quantiles
    ]
    return [event.to_dict() for event in events]


def _joined(steps: tuple[Step, ...]) -> list[str]:
    """The private tables a plan's joins read, in order (public names)."""
    return [
        name
        for step in steps
        if isinstance(step, PrivateJoin)
        for name in (step.table, *_joined(step.steps))
    ]


def describe(plan: Plan, release: ReleasePlan) -> dict[str, Any]:
    """A ledger description made of public parameters only.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0))
        >>> _ = sess.query().agg(pf.count()).release(0.5)
        >>> sorted(sess.ledger[0].description)[:3]
        ['ci95', 'events', 'filters']
    """
    selection = release.selection
    return {
        "group_by": list(plan.group_by),
        "n_keys": plan.n_groups,
        "selected": list(plan.selected),
        "selection": None
        if selection is None
        else {"threshold": selection.threshold, "delta": selection.delta},
        "filters": len(plan.filters),
        **({"table": plan.table} if plan.table is not None else {}),
        **({"tables": tables} if (tables := _joined(plan.steps)) else {}),
        "outputs": [out.name for out in release.outputs],
        # Each output's 95% interval in brief (Width.interval): the dashboard shows it.
        "ci95": {out.name: out.aggregate.width(release).interval() for out in release.outputs},
        "limits": release.limits.describe(l1=release.family == "laplace"),
        "measurements": [{"key": m.key, **m.noise} for m in release.measurements]
        + [
            {"key": q.key, q.share.parameter: float(q.exact_share), "eta": q.eta}
            for q in release.quantiles
        ],
        "events": _events(release, plan.n_groups),
    }
