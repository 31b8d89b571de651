"""The error model and the search of ``tune``: from noisy histograms to limits and bounds.

Pure post-processing of :class:`~privframe.plan.tuning.Estimates` (the noisy
histograms of :mod:`privframe.plan.tuning`, where the model is stated): each
candidate query is planned at ``plan_rho`` by the planner
(:func:`~privframe.plan.planner.plan_release`, what ``explain`` shows), its
outputs' bounded expectations come from their own estimators fed the
expected measurements, and the candidate with the least estimated error wins.
The value buckets just beyond the visible support are read raw (their noisy
weights, nearly unbiased), so mass in a sparse tail counts as clipped; each output's
bias then carries an uncertainty from their noise, which enters the error
(:class:`Bias`). The table reports the bias beside the noise, for the given
and the tuned query.

The search is coordinate descent over bin edges: all (k, m) pairs of the
contribution histograms' edges, then each bounded column's lower and upper
bound among its value buckets' edges, repeated until nothing improves
(at most a few sweeps). Quantiles are not in the objective: their bounds
are set to the buckets holding the 0.1% and 99.9% points of their column
(coarse: within a factor √2), and they keep their place in the ρ split.
:func:`choose_bounds` runs the same search over the bounds of a release's
``bounds="auto"`` aggregates only, for :mod:`privframe.plan.auto_bounds`.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> from fractions import Fraction
    >>> from privframe.plan.ir import Bound, Plan
    >>> from privframe.plan.keys import from_list
    >>> from privframe.plan.tuning import SCALE, design, read
    >>> plan = Plan(bound=Bound(4, 4), group_by=("g",), keys=from_list("g", ["a", "b"]),
    ...             aggregates=(pf.count(),))
    >>> d = design(plan, has_unit=True, rho=Fraction(100))
    >>> groups = np.zeros(d.pieces[0].bins); groups[0] = 1000  # every unit in one group
    >>> rows = np.zeros(d.pieces[1].bins); rows[1] = 1000 * SCALE  # with 2 rows there
    >>> choice = choose(plan, read(d, {p.name: a for p, a in zip(d.pieces, [groups, rows])}),
    ...                 Fraction(1), None)
    >>> choice.plan.bound
    Bound(max_groups=1, max_rows_per_group=2, max_rows=None)
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from privframe.engines.spec import COUNT, DISTINCT, ValueSpec
from privframe.errors import PrivframeError
from privframe.plan.aggregates import Bounded
from privframe.plan.aggregates.base import Summary
from privframe.plan.ir import Bound, Plan
from privframe.plan.planner import ReleasePlan, plan_release
from privframe.plan.split import Balance
from privframe.plan.tuning import Estimates, Histogram, integer_edges

__all__ = ["Choice", "choose", "choose_bounds"]

_SWEEPS = 4
_EVIDENT = 2.0  # automatic bounds read a raw tail bucket when its noisy weight reaches this many σ


def _row_units(x: np.ndarray, v: ValueSpec) -> np.ndarray:
    """What a row of value ``x`` adds to the engine's sum for ``v``, in grid units."""
    if v.present:
        return np.ones_like(x)
    y = np.clip(x, v.lower, v.upper)
    if v.square_around is not None:
        y = (y - v.square_around) ** 2
    units = np.clip(np.rint(np.ldexp(y, v.grid_exponent)), v.lower_units, v.upper_units)
    return units - v.centre_units


def _summary(rows: float, distinct: float, h: Histogram | None) -> Summary:
    """A group's estimated rows, distinct units and (with a value histogram) moments."""
    if h is None or h.total <= 0:
        return Summary(rows, distinct)
    mean = h.expect(h.mid)
    return Summary(rows, distinct, mean, h.expect(np.abs(h.mid)), h.expect((h.mid - mean) ** 2))


@dataclass(frozen=True)
class Bias:
    """What bounding does to a plan released at ``plan_rho``, as ``tune`` estimates it.

    All relative: the bias, its uncertainty and the noise of an output are
    divided by its size (:meth:`~privframe.plan.aggregates.base.Aggregate.typical_value`).

    Attributes:
        rows_dropped: the fraction of the rows that ``max_groups`` and
            ``max_rows_per_group`` drop (0 without a privacy unit).
        clipped: per bounded output, the fraction of its column's value mass
            (Σ|x|) beyond its bounds.
        bias: per modelled output, (bounded expectation − unbounded value)/size.
        uncertainty: per output, the std of that bias estimate from the noise
            of the tail buckets it reads raw (:data:`~privframe.plan.tuning.TAIL_BINS`).
        noise: per output, σ/size from the planner at ``plan_rho``.

    Example:
        >>> b = Bias(0.0, {"x_sum": 0.01}, {"x_sum": -0.01}, {"x_sum": 0.002}, {"x_sum": 0.003})
        >>> round(b.error, 9)
        0.000113
    """

    rows_dropped: float
    clipped: Mapping[str, float]
    bias: Mapping[str, float]
    uncertainty: Mapping[str, float]
    noise: Mapping[str, float]

    @property
    def error(self) -> float:
        """Σ over outputs of (bias² + uncertainty² + noise²): the estimated relative error."""
        total = sum(
            self.bias[o] ** 2 + self.uncertainty[o] ** 2 + self.noise[o] ** 2 for o in self.bias
        )
        return total if math.isfinite(total) else math.inf


@dataclass(frozen=True, eq=False)
class _Model:
    """The error model of the module doc, for one plan and ``plan_rho``."""

    estimates: Estimates
    has_unit: bool
    plan_rho: Fraction
    weights: Mapping[str, float] | Balance | None
    given: Mapping[str, tuple[float, float]]  # per column, the span of the given bounds

    @functools.cached_property
    def raw(self) -> dict[str, np.ndarray]:
        """Per column, which buckets are read raw: its tail, within the given bounds' span.

        Beyond the given bounds the user accepts the clipping, and the raw
        noise there would only be fitted.
        """
        raw = {}
        for column, h in self.estimates.values.items():
            lower, upper = self.given.get(column, (math.inf, -math.inf))
            tail = np.full(h.low.size, np.nan) if h.tail is None else h.tail
            raw[column] = np.isfinite(tail) & (h.high > lower) & (h.low < upper)
        return raw

    @functools.cached_property
    def values(self) -> dict[str, Histogram]:
        """The value histograms, the buckets of :attr:`raw` read raw: what bounds are judged by."""
        values = {}
        for column, h in self.estimates.values.items():
            if h.tail is not None:
                h = dataclasses.replace(h, tail=np.where(self.raw[column], h.tail, np.nan))
            values[column] = h.with_tail()
        return values

    def _mean_min(self, h: Histogram | None, cap: int | None) -> float:
        """E[min(x, cap)] over a contribution histogram (1 without one: one group, one row)."""
        if h is None:
            return 1.0
        return h.expect(h.mid) if cap is None else h.mean_of_min(cap)

    def per_group(self, k: int | None, m: int | None) -> tuple[float, float]:
        """Rows and distinct units per group kept by the limits k and m (None: no limit)."""
        e = self.estimates
        groups = self._mean_min(e.groups, k)
        rows = e.units * groups * self._mean_min(e.rows, m) / e.design.n_groups
        return rows, e.units * groups / e.design.n_groups

    def _noisy(
        self, release: ReleasePlan, rows: float, distinct: float, values: Mapping[str, Histogram]
    ) -> dict[str, np.ndarray]:
        """Each measurement's expected value without noise: what the estimators read."""
        noisy = {}
        for m in release.measurements:
            spec = m.need.value_spec(m, "__tune")
            if spec is None:
                column = m.need.exact_column("__tune")
                value = rows if column == COUNT else distinct if column == DISTINCT else 0.0
            else:
                h = values.get(spec.column)
                value = 0.0 if h is None else rows * h.expect(_row_units(h.mid, spec))
            noisy[m.key] = np.array([value])
        return noisy

    def _limits(self, release: ReleasePlan) -> tuple[int | None, int | None]:
        """The release's k and m where a contribution histogram models them, else None."""
        limits = release.limits
        k = limits.max_groups if self.estimates.groups is not None else None
        m = limits.max_rows_per_group if self.estimates.rows is not None else None
        return k, m

    def _outputs(
        self, release: ReleasePlan, values: Mapping[str, Histogram]
    ) -> dict[str, tuple[float, float]]:
        """Per modelled output: (bounded expectation − unbounded value)/size, and σ/size."""
        true_rows, true_distinct = self.per_group(None, None)
        noisy = self._noisy(release, *self.per_group(*self._limits(release)), values)
        result = {}
        for out in release.outputs:
            agg = out.aggregate
            h = values.get(agg.column) if isinstance(agg, Bounded) else None
            truth, size = agg.typical_value(_summary(true_rows, true_distinct, h))
            if not size > 0:
                continue
            with np.errstate(all="ignore"):
                columns = agg.estimate(release, noisy, True)
            value = float(columns[out.name][0])
            std = float(columns[agg.error_columns()[0]][0])
            result[out.name] = ((value - truth) / size, std / size)
        return result

    def _uncertainty(
        self, plan: Plan, release: ReleasePlan, bias: Mapping[str, float]
    ) -> dict[str, float]:
        """Per output, the std of its bias estimate from the noise (σ each) of the buckets read raw.

        Linearised: each raw bucket the bounds cut moves by σ in turn, and the
        moves of the bias add in quadrature (the buckets' noise is
        independent). Buckets inside every bound of their column are skipped:
        they move a bias only through the totals.
        """
        variance = dict.fromkeys(bias, 0.0)
        for column, h in self.values.items():
            cut = np.zeros(h.low.size, dtype=bool)
            for a in plan.aggregates:
                if isinstance(a, Bounded) and a.column == column:
                    cut |= (h.low < a.lower) | (h.high > a.upper)
            for j in np.flatnonzero(self.raw[column] & cut):
                weight = h.weight.copy()
                weight[j] += h.sigma
                moved = {**self.values, column: dataclasses.replace(h, weight=weight)}
                for name, (b, _) in self._outputs(release, moved).items():
                    # An output the model leaves out at the estimates (no size there) stays out.
                    if name in variance:
                        variance[name] += (b - bias[name]) ** 2
        return {name: math.sqrt(v) for name, v in variance.items()}

    def assess(self, plan: Plan) -> Bias | None:
        """The estimated bias, its uncertainty and the noise of ``plan`` at plan_rho.

        None when ``plan`` cannot be planned.
        """
        try:
            release = plan_release(plan, self.has_unit, self.plan_rho, self.weights)
        except PrivframeError:
            return None
        outputs = self._outputs(release, self.values)
        bias = {name: b for name, (b, _) in outputs.items()}
        kept, rows = self.per_group(*self._limits(release))[0], self.per_group(None, None)[0]
        clipped = {}
        for a in plan.aggregates:
            h = self.values.get(a.column) if isinstance(a, Bounded) else None
            if isinstance(a, Bounded) and h is not None and h.total > 0:
                beyond = h.expect(np.abs(h.mid - np.clip(h.mid, a.lower, a.upper)))
                # Raw tail buckets can be negative; a share of mass is not.
                share = beyond / max(h.expect(np.abs(h.mid)), 1e-300)
                clipped[a.output_name] = max(share, 0.0)
        return Bias(
            rows_dropped=1 - kept / rows if rows > 0 else 0.0,
            clipped=clipped,
            bias=bias,
            uncertainty=self._uncertainty(plan, release, bias),
            noise={name: std for name, (_, std) in outputs.items()},
        )

    def objective(self, plan: Plan) -> float:
        """Σ over modelled outputs of (bias² + uncertainty² + σ²)/size² at plan_rho."""
        bias = self.assess(plan)
        return math.inf if bias is None else bias.error


_Variable = tuple[str, float, float]  # a bounded column and its given bounds


@dataclass(frozen=True)
class _State:
    """A point of the search: k, m (None where they do not apply) and each variable's bounds."""

    k: int | None
    m: int | None
    bounds: tuple[tuple[float, float], ...]


def _searched(a: object, only_auto: bool) -> bool:
    """Whether the search moves ``a``'s bounds: the ``auto`` ones only, or every modelled one."""
    return isinstance(a, Bounded) and (a.auto if only_auto else not a.tuned_by_coverage)


def _variables(plan: Plan, only_auto: bool) -> tuple[_Variable, ...]:
    """The (column, lower, upper) of the searched bounded aggregates: each is searched once."""
    return tuple(
        dict.fromkeys(
            (a.column, a.lower, a.upper)
            for a in plan.aggregates
            if isinstance(a, Bounded) and _searched(a, only_auto)
        )
    )


def _limit_candidates(top: int) -> list[int]:
    """Every limit up to 16, then the bins' edges, and ``top``."""
    return sorted({*range(1, min(top, 16) + 1), *integer_edges(top), top})


def _bound_edges(h: Histogram | None) -> tuple[list[float], list[float]] | None:
    """Candidate lower and upper bounds: the support's bucket edges and 0, split at the median."""
    support = None if h is None else h.support()
    if h is None or support is None:
        return None
    first, last = support
    edges = sorted({0.0, *h.low[first : last + 1].tolist(), *h.high[first : last + 1].tolist()})
    median = float(h.mid[h.quantile(0.5)])
    return [e for e in edges if e <= median], [e for e in edges if e >= median]


def _quantile_bounds(h: Histogram | None) -> tuple[float, float] | None:
    """The buckets holding the 0.1% and 99.9% points: a quantile's candidates span them."""
    if h is None or h.support() is None:
        return None
    lower, upper = float(h.low[h.quantile(0.001)]), float(h.high[h.quantile(0.999)])
    return (lower, upper) if lower < upper else None


@dataclass(frozen=True, eq=False)
class _Search:
    """The coordinate descent of the module doc over ``plan``'s limits and bounds.

    With ``only_auto`` (automatic bounds) only the ``auto`` aggregates' bounds
    move: the plan's limits and its other bounds are held as given.
    """

    plan: Plan
    model: _Model
    only_auto: bool = False
    held: frozenset[tuple[int, int]] = frozenset()  # (variable, side) whose bound stays put

    @functools.cached_property
    def variables(self) -> tuple[_Variable, ...]:
        """The searched (column, lower, upper) triples, in the order of the state's bounds."""
        return _variables(self.plan, self.only_auto)

    def build(self, state: _State) -> Plan:
        """The plan with the state's limits and bounds (quantiles by their rule)."""
        chosen = dict(zip(self.variables, state.bounds, strict=True))
        values = self.model.estimates.values
        aggregates = []
        for a in self.plan.aggregates:
            if isinstance(a, Bounded):
                new = (
                    chosen.get((a.column, a.lower, a.upper))
                    if _searched(a, self.only_auto)
                    else None
                )
                if a.tuned_by_coverage and not self.only_auto:
                    new = _quantile_bounds(values.get(a.column))
                if new is not None:
                    a = dataclasses.replace(a, lower=new[0], upper=new[1])
            aggregates.append(a)
        bound = self.plan.bound
        if self.model.has_unit and not self.only_auto:
            bound = Bound(max_groups=state.k, max_rows_per_group=state.m)
        return dataclasses.replace(self.plan, aggregates=tuple(aggregates), bound=bound)

    def start(self) -> _State:
        """The given query's limits (k = all groups, m = 1 where it has none) and bounds."""
        bound, n_groups = self.plan.bound or Bound(), self.model.estimates.design.n_groups
        k = min(bound.max_groups or n_groups, n_groups) if n_groups > 1 else None
        m = bound.max_rows_per_group or bound.max_rows or 1
        return _State(
            k, m if self.model.has_unit else None, tuple((v[1], v[2]) for v in self.variables)
        )

    def limits(self, state: _State) -> list[_State]:
        """Every (k, m) pair among the contribution histograms' edges, the bounds held."""
        e = self.model.estimates
        ks: Sequence[int | None] = [state.k]
        if e.groups is not None and e.groups.support() is not None:
            n = e.design.n_groups
            ks = _limit_candidates(n)
        ms: Sequence[int | None] = [state.m]
        support = None if e.rows is None else e.rows.support()
        if e.rows is not None and support is not None:
            top = float(e.rows.high[support[1]])
            ms = _limit_candidates(int(top))
        return [dataclasses.replace(state, k=k, m=m) for k, m in itertools.product(ks, ms)]

    def bounds(self, i: int, side: int, state: _State) -> list[_State]:
        """Variable ``i``'s lower (side 0) or upper (side 1) bound among its edges."""
        edges = _bound_edges(self.model.values.get(self.variables[i][0]))
        if edges is None or (i, side) in self.held:
            return []
        states = []
        for x in edges[side]:
            lower, upper = state.bounds[i]
            pair = (x, upper) if side == 0 else (lower, x)
            if pair[0] < pair[1]:
                bounds = (*state.bounds[:i], pair, *state.bounds[i + 1 :])
                states.append(dataclasses.replace(state, bounds=bounds))
        return states

    def run(self, state: _State) -> tuple[_State, float]:
        """Coordinate descent from ``state``; only strict improvements are taken."""
        blocks: list[Callable[[_State], list[_State]]] = [] if self.only_auto else [self.limits]
        for i in range(len(self.variables)):
            blocks += [functools.partial(self.bounds, i, 0), functools.partial(self.bounds, i, 1)]
        seen: dict[_State, float] = {}

        def error(state: _State) -> float:
            if state not in seen:
                seen[state] = self.model.objective(self.build(state))
            return seen[state]

        best = error(state)
        for _ in range(_SWEEPS):
            before = state
            for block in blocks:
                for candidate in block(state):
                    if error(candidate) < best * (1 - 1e-9):
                        state, best = candidate, error(candidate)
            if state == before:
                break
        return state, best


Row = tuple[str, str, float, str]
"""One row of tune's table: item, statistic, value, note."""


@dataclass(frozen=True, eq=False)
class Choice:
    """What the search chose: the tuned plan, its estimated error and the table of estimates.

    Attributes:
        plan: the given plan with the chosen limits and bounds.
        error: its estimated error (Σ over outputs of (bias² + u² + σ²)/size²,
            u the uncertainty of the bias: :class:`Bias`).
        given_error: the given plan's, or ``inf`` when it cannot be released as is.
        table: the rows of the summary table (item, statistic, value, note).
        bias: the tuned plan's estimated bias of bounding beside its noise
            (None when the choice came from a server: its table has the rows).
        given_bias: the given plan's, or None when it cannot be released as is.
    """

    plan: Plan
    error: float
    given_error: float
    table: tuple[Row, ...]
    bias: Bias | None = None
    given_bias: Bias | None = None


def _distribution_rows(estimates: Estimates) -> list[Row]:
    """Quantiles of each noisy histogram (the bin holding them: its low edge, and the bin)."""
    unit = "privacy units" if estimates.design.has_unit else "rows"
    rows: list[Row] = [(unit, "estimate", estimates.units, "total of a noisy histogram")]
    named: list[tuple[str, Histogram | None, tuple[float, ...]]] = [
        ("groups per unit", estimates.groups, (0.5, 0.9, 0.99)),
        ("rows per (unit, group)", estimates.rows, (0.5, 0.9, 0.99)),
    ]
    named += [(f"values of {c}", h, (0.01, 0.5, 0.99)) for c, h in estimates.values.items()]
    for item, h, quantiles in named:
        if h is None:
            continue
        if h.support() is None:
            rows.append((item, "p50", math.nan, "no signal above the noise: give tune more rho"))
            continue
        for q in quantiles:
            i = h.quantile(q)
            note = f"unit-weighted; in [{h.low[i]:.4g}, {h.high[i]:.4g})"
            rows.append((item, f"p{q * 100:g}", float(h.low[i]), note))
    return rows


def _choice_rows(given: Plan, chosen: Plan, has_unit: bool) -> list[Row]:
    """The chosen limits and bounds, each with the given one."""
    rows: list[Row] = []
    if has_unit:
        before, after = given.bound or Bound(), chosen.bound or Bound()
        for name in ("max_groups", "max_rows_per_group", "max_rows"):
            old, new = getattr(before, name), getattr(after, name)
            if old is not None or new is not None:
                value = math.nan if new is None else float(new)
                rows.append((name, "chosen", value, f"given: {old}"))
    for old, new in zip(given.aggregates, chosen.aggregates, strict=True):
        if isinstance(old, Bounded) and isinstance(new, Bounded):
            for side in ("lower", "upper"):
                note = f"given: {getattr(old, side):g}"
                rows.append((f"{new.output_name} bounds", side, getattr(new, side), note))
    return rows


def _bias_rows(given: Bias | None, chosen: Bias | None) -> list[Row]:
    """The bias of bounding beside the noise, per output, for the tuned and the given plan."""
    if chosen is None:
        return []

    def was(field: str, name: str | None = None) -> str:
        """The given plan's value of ``field`` (of output ``name``), for the note."""
        if given is None:
            return "given: cannot be released as is"
        value = getattr(given, field)
        return f"given: {value if name is None else value.get(name, math.nan):.3g}"

    rows: list[Row] = [
        (
            "rows dropped",
            "fraction",
            chosen.rows_dropped,
            f"{was('rows_dropped')}; the share of rows max_groups and max_rows_per_group drop",
        )
    ]
    for name, value in chosen.clipped.items():
        note = f"{was('clipped', name)}; the share of Σ|x| beyond the bounds"
        rows.append((f"{name} clipped", "fraction", value, note))
    for name, bias in chosen.bias.items():
        rows.append(
            (
                f"{name} bias",
                "relative",
                bias,
                f"{was('bias', name)}; (bounded − unbounded)/size, "
                f"± {chosen.uncertainty[name]:.2g} (the noisy tail)",
            )
        )
        note = f"{was('noise', name)}; σ/size at plan_rho"
        rows.append((f"{name} noise", "relative", chosen.noise[name], note))
    return rows


def choose(
    plan: Plan,
    estimates: Estimates,
    plan_rho: Fraction,
    weights: Mapping[str, float] | Balance | None,
) -> Choice:
    """The limits and bounds of least estimated error at ``plan_rho``, and the table of estimates.

    Never raises on account of the estimates (it runs after ``tune`` has been
    charged): a candidate that cannot be planned has infinite error, and
    without any signal the given limits and bounds are kept. A contribution
    limit the query did not give starts at k = all groups, m = 1; ``max_rows``
    is dropped.

    Example:
        >>> import numpy as np
        >>> import privframe as pf
        >>> from fractions import Fraction
        >>> from privframe.plan.ir import Bound, Plan
        >>> from privframe.plan.tuning import SCALE, design, read
        >>> plan = Plan(aggregates=(pf.count(),), bound=Bound(max_rows_per_group=1))
        >>> d = design(plan, has_unit=True, rho=Fraction(10**6))
        >>> rows = np.zeros(d.pieces[0].bins)
        >>> rows[2] = 3000 * SCALE  # 3,000 units, each with 3 rows
        >>> choose(plan, read(d, {"rows per (unit, group)": rows}), Fraction(1), None).plan.bound
        Bound(max_groups=None, max_rows_per_group=3, max_rows=None)
    """
    design = estimates.design
    given: dict[str, tuple[float, float]] = {}
    for a in plan.aggregates:
        if isinstance(a, Bounded):
            lower, upper = given.get(a.column, (a.lower, a.upper))
            given[a.column] = (min(lower, a.lower), max(upper, a.upper))
    model = _Model(estimates, design.has_unit, plan_rho, weights, given)
    search = _Search(plan, model)
    state, error = search.run(search.start())
    chosen = search.build(state)
    bias, given_bias = model.assess(chosen), model.assess(plan)
    given_error = math.inf if given_bias is None else given_bias.error
    summary = [
        *_distribution_rows(estimates),
        *_choice_rows(plan, chosen, design.has_unit),
        *_bias_rows(given_bias, bias),
        ("plan_rho", "given", float(plan_rho), "the ρ the noise and the errors are estimated at"),
        (
            "estimated error",
            "given",
            given_error,
            "Σ over outputs (bias² + uncertainty² + σ²)/size², plan_rho",
        ),
        ("estimated error", "chosen", error, "the same, for the tuned query (an estimate)"),
    ]
    return Choice(chosen, error, given_error, tuple(summary), bias, given_bias)


def choose_bounds(
    plan: Plan,
    estimates: Estimates,
    plan_rho: Fraction,
    weights: Mapping[str, float] | Balance | None,
    start: Mapping[str, tuple[float, float]],
) -> dict[str, tuple[float, float]]:
    """Bounds for ``plan``'s ``auto`` aggregates, per column: the search of least estimated error.

    Automatic bounds (:mod:`privframe.plan.auto_bounds`) with public groups:
    the coordinate descent of :func:`choose`, with its objective, from
    ``start`` (ApproxBounds' bounds), over the bounds of the ``auto``
    aggregates only (their own bounds are stand-ins). The plan's contribution
    limits and its given bounds are held, the plan is released at
    ``plan_rho`` with ``weights``, and a bound ``start`` puts at 0 (all the
    values that show have one sign) stays there. Pure post-processing of
    ``estimates``, the noisy histograms the release has already charged.

    The user gave no bounds, so no given span limits the raw tail buckets
    read; instead each side reads the run of them next to the support that
    show mass (noisy weight at least 2σ, :func:`_evident_span`). Beyond it
    the raw buckets are mostly noise, and the objective, which counts the
    uncertainty of the bias only over the raw buckets a bound cuts, would
    move the bound out over them to shed it.

    The estimates are values histograms only, each unit weighing 1: the model
    takes a group's rows as ``units/G`` over the ``G`` public groups (one row
    per unit, each in one group). That is exact for one row per unit
    (``max_rows_per_group=1``, or the per-unit stage's one total per unit and
    group) in one group; with more rows or groups per unit it undercounts the
    rows, so it overstates the noise relative to the outputs (by at most
    ``k·m``) and leans to tighter bounds. A start that cannot be planned at
    ``plan_rho`` is returned as it is (every candidate's error is infinite).

    Example:
        >>> import numpy as np
        >>> import privframe as pf
        >>> from privframe.plan import auto_bounds
        >>> from privframe.plan.ir import Bound, Plan
        >>> from privframe.plan.tuning import SCALE, read
        >>> plan = Plan(bound=Bound(max_rows_per_group=1), aggregates=(pf.sum("x", bounds="auto"),))
        >>> d = auto_bounds.design(plan, True, Fraction(10**6))
        >>> raw = np.zeros(d.pieces[0].bins)
        >>> zero = len(raw) // 2  # zero + i: the i-th magnitude bucket, 2**((i - 41)/2) up
        >>> raw[zero + 47] = 10_000 * SCALE  # 10,000 people in [8, 11.3)
        >>> raw[zero + 53] = 5 * SCALE  # and 5 in [64, 90.5)
        >>> e = read(d, {"values of x": raw})
        >>> start = {"x": (0.0, 90.51)}  # ApproxBounds: the outermost bucket above the noise
        >>> lower, upper = choose_bounds(plan, e, Fraction(1, 1000), None, start)["x"]
        >>> lower, round(upper, 2)  # at this rho, clipping the 5 costs less than their noise
        (0.0, 11.31)
    """
    searched = [column for column, _, _ in _variables(plan, True)]
    given = {column: _evident_span(estimates.values[column], start[column]) for column in searched}
    model = _Model(estimates, estimates.design.has_unit, plan_rho, weights, given)
    bounds = tuple(start[column] for column in searched)
    held = frozenset(
        (i, side) for i, pair in enumerate(bounds) for side in (0, 1) if pair[side] == 0
    )
    search = _Search(plan, model, only_auto=True, held=held)
    first = dataclasses.replace(search.start(), bounds=bounds)
    state, _ = search.run(first)
    return {
        column: bounds
        for (column, _, _), bounds in zip(search.variables, state.bounds, strict=True)
    }


def _evident_span(h: Histogram, start: tuple[float, float]) -> tuple[float, float]:
    """``start`` widened over each run of raw tail buckets next to the support that show mass.

    A raw bucket shows mass when its noisy weight reaches ``_EVIDENT``·σ (a
    bucket of pure noise does with probability 2.3%); the run stops at the
    first that does not, so noise far out, which would only be fitted, is
    not read (:func:`choose_bounds`).

    Example:
        >>> from privframe.engines.contributions import signed_buckets
        >>> from privframe.plan.tuning import MAGNITUDE_EDGES, _split_tail, _value_histogram
        >>> raw = np.zeros(signed_buckets(MAGNITUDE_EDGES))
        >>> raw[250], raw[251], raw[252], raw[255] = 100.0, 3.0, 0.5, 5.0  # support: bucket 250
        >>> h = _value_histogram(MAGNITUDE_EDGES, *_split_tail(raw, threshold=10.0), sigma=1.0)
        >>> span = _evident_span(h, (0.0, float(h.high[250])))
        >>> bool(span[1] == h.high[251])  # 251 shows; 252 does not, so 255 is not read
        True
    """
    lower, upper = start
    support = h.support()
    if h.tail is None or support is None:
        return lower, upper
    evident = np.isfinite(h.tail) & (np.nan_to_num(h.tail) >= _EVIDENT * h.sigma)
    first, last = support
    while first > 0 and evident[first - 1]:
        first -= 1
    while last + 1 < evident.size and evident[last + 1]:
        last += 1
    return min(lower, float(h.low[first])), max(upper, float(h.high[last]))
