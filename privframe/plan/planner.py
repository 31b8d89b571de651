"""The planner: from a query plan and a budget to measurements, their split and their noise.

This is where a release's budget is decided. The planner never sees data:
its inputs are the plan's public parameters (bounds, contribution limits,
keys) and the budget. It resolves the contribution limits
(:mod:`privframe.plan.limits`), asks each aggregate which measurements it
needs (:mod:`privframe.plan.aggregates`: each need derives its own
sensitivity), splits the budget across the distinct measurements (to
minimise the outputs' total variance under the user's weights, or to
balance relative error with ``pf.balance``: :mod:`privframe.plan.split`),
and calibrates each noise to its exact share.

A session's budget decides the noise. Under zCDP (:func:`plan_release`) a
release spends ρ on discrete Gaussian noise calibrated to L2 sensitivities.
Under pure DP (:func:`plan_pure_release`) it spends ε on discrete Laplace
noise calibrated to L1 sensitivities; the shares of ε add up to ε (basic
composition, Dwork & Roth 2014, Thm. 3.16) and a quantile's exponential
mechanism is charged in ε. Under (ε, δ)-DP (:func:`plan_approx_release`) it
plans both — the Laplace release at ε, and the Gaussian release at the
largest ρ whose tightest (ε, δ) conversion is within (ε, δ) (Canonne, Kamath
& Steinke 2020, Prop. 14) — and keeps the one with the smaller noise.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> sess = pf.Session(pl.DataFrame({"u": [1], "r": ["a"]}), "u", pf.zCDP(1.0))
    >>> q = sess.query().bound(max_groups=3, max_rows_per_group=5).group_by(
    ...     "r", keys=["a", "b", "c", "d"]).agg(pf.count())
    >>> round(q.explain(rho=0.5).measurements[0].l2_sensitivity, 4)
    8.6603
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from fractions import Fraction

import scipy

from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
from privframe.errors import (
    ExcessiveNoiseWarning,
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    warn_caller,
)
from privframe.mechanisms.noise import MAX_LAPLACE_SCALE, MAX_SIGMA, MIN_LAPLACE_SCALE, MIN_SIGMA
from privframe.mechanisms.selection import discrete_tail, discrete_threshold
from privframe.numeric import Number, check_positive, exact, round_down, round_up
from privframe.plan.aggregates import Aggregate
from privframe.plan.aggregates.distinct import SELECTION_KEY, DistinctNeed
from privframe.plan.aggregates.quantile import QuantileMeasurement
from privframe.plan.ir import Bound, Plan
from privframe.plan.limits import Limits
from privframe.plan.measurements import Family, Measurement, Need, NoiseRangeError, Share
from privframe.plan.split import Balance, balanced_fractions, weighted_fractions
from privframe.plan.stages import stage_limits

__all__ = [
    "NOISE_FLOOR_EPSILON",
    "NOISE_FLOOR_RHO",
    "Output",
    "ReleasePlan",
    "Selection",
    "plan_approx_release",
    "plan_pure_release",
    "plan_release",
    "resolve_limits",
    "selects",
]


@dataclass(frozen=True)
class Output:
    """One output column and the measurements it is computed from."""

    name: str
    aggregate: Aggregate
    measurements: tuple[str, ...]


@dataclass(frozen=True)
class Selection:
    """Private key selection: keep a group iff its noisy distinct-unit count is >= threshold.

    The counts have L2 sensitivity sqrt(k) (a unit adds 1 to at most k
    groups); a group that only one unit holds has count 1 and survives with
    probability P[1 + Z >= threshold], so some group of that unit survives
    with probability at most ``delta`` (:mod:`privframe.mechanisms.selection`): the
    charged δ rounded down to a float, so the mechanism's δ never exceeds it.

    With public keys over some group columns (``Plan.selected`` the others),
    selection runs on the projection onto the selected columns: a unit in at
    most k groups of the full grouping is in at most k combinations of the
    selected columns, so their distinct-unit counts also have sensitivity
    sqrt(k) and the same threshold spends the same δ. Rows whose keyed columns
    are not public were dropped first, a row-wise filter that does not look at
    other rows. Every kept combination is released with every public key, so
    which full groups appear is a function of the kept combinations and public
    keys only, and a new combination (held by the added unit alone) appears
    with at most the probability a new group of a plain selection does. The
    aggregates are those of a plain selection over the full grouping (k groups
    per unit), restricted to the released groups.
    """

    measurement: Measurement
    threshold: int
    delta: float

    def single_unit_survival(self) -> float:
        """P[1 + Z >= threshold]: a group held by one unit is kept with this probability."""
        return discrete_tail(self.measurement.sigma_units, self.threshold - 1)

    def survival_count(self, probability: float) -> int:
        """The distinct-unit count at which a group is kept with at least ``probability``."""
        sigma = self.measurement.sigma_units
        return max(1, math.ceil(self.threshold + float(scipy.special.ndtri(probability)) * sigma))


NOISE_FLOOR_RHO = Fraction(1, 2 * 10**12)
"""A measurement given less ρ than this draws noise above 10⁶ times its sensitivity.

A Gaussian measurement at share ρ_m has σ = Δ/sqrt(2ρ_m) (Bun & Steinke 2016,
Prop. 1.6): below 1/(2·10¹²), σ > 10⁶·Δ, the whole contribution of a million
units; a quantile's rank error grows as 1/sqrt(ρ_m) alike. Such an output is
noise unless its groups hold many millions of units (a census may), so
:meth:`ReleasePlan.warn_if_drowned` warns rather than refuses.
"""

NOISE_FLOOR_EPSILON = Fraction(1, 10**6)
"""A Laplace measurement given less ε than this draws noise above 10⁶ times its sensitivity.

Its scale is b = Δ₁/ε_m: below 10⁻⁶, b > 10⁶·Δ₁, as for :data:`NOISE_FLOOR_RHO`.
"""

_FLOORS: dict[Family, Fraction] = {"gaussian": NOISE_FLOOR_RHO, "laplace": NOISE_FLOOR_EPSILON}


@dataclass(frozen=True)
class ReleasePlan:
    """Everything a release needs except the data: limits, measurements, outputs, cost.

    ``cost`` is a budget of the session's kind: zCDP, PureDP or ApproxDP.
    ``family`` is the noise every measurement draws, and ``choice`` says,
    under (ε, δ)-DP, why that noise was chosen over the other. ``raised``
    names the measurements whose share asked for less noise than the exact
    sampler draws: they draw its smallest scale, and are charged their share
    (an (ε, δ) session's tight composition reads the raised noise from the
    ledger entry's events, so its spent may grow by less).
    """

    limits: Limits
    measurements: tuple[Measurement, ...]
    outputs: tuple[Output, ...]
    cost: zCDP | PureDP | ApproxDP
    selection: Selection | None = None
    quantiles: tuple[QuantileMeasurement, ...] = ()
    relative_errors: tuple[tuple[str, float], ...] = ()  # with a Balance: per output
    family: Family = "gaussian"
    choice: str = ""
    raised: tuple[str, ...] = ()

    def measurement(self, key: str) -> Measurement:
        """The noisy-vector measurement (Gaussian or Laplace) with this key."""
        return next(m for m in self.measurements if m.key == key)

    def quantile(self, key: str) -> QuantileMeasurement:
        """The quantile measurement with this key."""
        return next(m for m in self.quantiles if m.key == key)

    def warn_if_drowned(self) -> None:
        """Warn when a measurement's share is below its floor (:data:`NOISE_FLOOR_RHO`, ...).

        The floor is :data:`NOISE_FLOOR_RHO` for a share of ρ and
        :data:`NOISE_FLOOR_EPSILON` for a share of ε.

        Its outputs are then noise at any plausible data size; the release is
        still private, so it warns (:class:`~privframe.errors.ExcessiveNoiseWarning`)
        rather than refuses. Called before the charge: a warning turned into an
        error stops the release with nothing spent.

        Example:
            >>> import warnings
            >>> import privframe as pf
            >>> from privframe.plan.ir import Bound, Plan
            >>> with warnings.catch_warnings(record=True) as caught:
            ...     warnings.simplefilter("always")
            ...     plan_release(Plan(aggregates=(pf.count(),)), False, 1e-13).warn_if_drowned()
            >>> [w.category.__name__ for w in caught]
            ['ExcessiveNoiseWarning']
        """
        floor = _FLOORS[self.family]
        shares = [(m.key, m.exact_share) for m in self.measurements] + [
            (q.key, q.exact_share) for q in self.quantiles
        ]
        drowned = [key for key, share in shares if share < floor]
        if drowned:
            name = Share(Fraction(0), self.family).parameter
            total = sum((share for _, share in shares), Fraction(0))
            warn_caller(
                f"{', '.join(drowned)} would get a share of {name} below {float(floor):.3g} "
                f"(this release's noise costs {name}={float(total):.3g}): noise above a million "
                "units' whole contribution, so these outputs are noise unless groups hold many "
                f"millions of units. Release with a larger {name}, or fewer outputs",
                ExcessiveNoiseWarning,
            )


def resolve_limits(plan: Plan, has_unit: bool) -> Limits:
    """Contribution limits from the plan (each row is its own unit without a unit column).

    The row limits the plan's steps enforce (:mod:`privframe.plan.stages`) count
    as stated ones: a private join of ``l`` and ``r`` rows per unit limits a
    unit to ``M = l·r`` rows, and a unit with at most ``M`` rows is in at most
    ``M`` groups.
    """
    n_groups = plan.n_groups or 1
    if not has_unit:
        return Limits(1, 1, None, 1)
    bound = plan.bound or Bound()
    # other= collects many keys into one group: a per-unit stage's one row per key is
    # then no longer one row per group.
    stages = stage_limits(plan.steps, plan.group_by if plan.other is None else ())
    big_m = _smaller(bound.max_rows, stages.max_rows)
    m = _smaller(bound.max_rows_per_group, stages.max_rows_per_group)
    max_groups = bound.max_groups
    if selects(plan) and max_groups is None:
        max_groups = big_m  # at most M rows: at most M groups
    if selects(plan) and max_groups is None:
        raise InvalidValueError(
            f"choosing groups privately (group_by columns {list(plan.selected)} without public "
            "keys) needs .bound(max_groups=...): with no public key list for them there is no "
            "other bound on a unit's groups"
        )
    if selects(plan):
        assert max_groups is not None  # refused just above otherwise
        n_groups = max_groups
    if plan.bound is None and m is None and big_m is None:
        raise InvalidValueError(
            "a query over a privacy unit needs contribution limits: call "
            ".bound(max_groups=..., max_rows_per_group=...) (and optionally max_rows=...)"
        )
    if m is None and big_m is None:
        raise InvalidValueError(
            "the contribution limits have no row limit: max_rows_per_group is missing (the most "
            "rows one privacy unit adds to one group, e.g. .bound(max_groups=3, "
            "max_rows_per_group=5), or pf.Bound(...) the same way); or give max_rows (the most "
            "rows one unit adds in all)"
        )
    m = _smaller(m, big_m)
    assert m is not None
    k = min(max_groups or n_groups, n_groups)
    if big_m is None or big_m >= k * m:
        return Limits(k, m, big_m, k * m * m, stages.lines)
    q = min(k, big_m // m)
    r = big_m - q * m if q < k else 0
    return Limits(k, m, big_m, q * m * m + r * r, stages.lines)


def _smaller(a: int | None, b: int | None) -> int | None:
    """The smaller of two limits, where None is no limit."""
    return b if a is None else a if b is None else min(a, b)


def selects(plan: Plan) -> bool:
    """Whether the plan chooses groups privately (some group_by column without public keys).

    Example:
        >>> import privframe as pf
        >>> from privframe.plan.ir import Bound, Plan
        >>> keys = pf.keys.from_list("region", ["n", "s"])
        >>> selects(Plan(group_by=("region",), keys=keys)), selects(Plan(group_by=("region",)))
        (False, True)
        >>> selects(Plan(group_by=("region", "month"), keys=keys))
        True
    """
    return bool(plan.selected)


def _terms(
    outputs: Sequence[Output],
    needs: Mapping[str, Need],
    limits: Limits,
    terms_of: Callable[[Output, Mapping[str, float]], dict[str, float]],
) -> dict[str, dict[str, float]]:
    """Each output's first-order squared error as Σ_m b_m/ρ_m: its b_m by measurement key.

    ``terms_of`` reads them from the aggregate, given each measurement's
    squared 95% error c/ρ from its need.
    """
    c: dict[str, float] = {}
    for key, need in needs.items():
        try:
            c[key] = need.error_coefficient(limits)
        except ArithmeticError:  # limits beyond the float range: that output splits evenly
            c[key] = math.inf
    terms: dict[str, dict[str, float]] = {}
    for out in outputs:
        try:
            terms[out.name] = terms_of(out, c)
        except ArithmeticError:
            # Bounds so extreme that their squares leave the float range: split evenly.
            terms[out.name] = dict.fromkeys(out.measurements, 1.0)
    return terms


def _fractions_by_key(
    outputs: Sequence[Output],
    terms: Mapping[str, Mapping[str, float]],
    fractions: Callable[[list[list[float]]], list[float]],
) -> dict[str, Fraction]:
    """Exact shares by measurement key from a fractions solver over the terms matrix."""
    order = list(dict.fromkeys(k for out in outputs for k in out.measurements))
    matrix = [[row.get(k, 0.0) for k in order] for row in terms.values()]
    return {k: Fraction(f) for k, f in zip(order, fractions(matrix), strict=True)}


def _weights(
    outputs: Sequence[Output],
    needs: Mapping[str, Need],
    limits: Limits,
    weights: Mapping[str, float] | None,
) -> dict[str, Fraction]:
    """Shares that minimise the outputs' total weighted variance (``weighted_fractions``).

    Each output's error terms come from its aggregate's ``split_terms`` and
    count relative to the least it could have alone, so the split does not
    depend on units; ``weights`` (default 1) weigh the outputs.
    """
    if weights is not None and not isinstance(weights, Mapping):
        raise InvalidArgumentError(
            f"weights must map output names to numbers, got {type(weights).__name__}"
        )
    given = dict(weights or {})
    names = {o.name for o in outputs}
    unknown = sorted(set(given) - names)
    if unknown:
        raise InvalidValueError(f"weights name unknown outputs {unknown}; outputs: {sorted(names)}")
    w = [check_positive(f"weight of {out.name!r}", given.get(out.name, 1.0)) for out in outputs]
    terms = _terms(outputs, needs, limits, lambda out, c: out.aggregate.split_terms(c))
    return _fractions_by_key(outputs, terms, lambda matrix: weighted_fractions(matrix, w))


def _balanced(
    outputs: Sequence[Output], needs: Mapping[str, Need], limits: Limits, balance: Balance
) -> tuple[dict[str, Fraction], dict[str, dict[str, float]]]:
    """Shares that minimise the largest first-order relative error, and each output's terms.

    Output i's squared relative error is Σ_m b_im/ρ_m (``privframe.plan.split``),
    at the sizes the user guessed.
    """
    names = {o.name for o in outputs}
    unknown = sorted(set(balance.expected) - names)
    if unknown:
        raise InvalidValueError(
            f"pf.balance names unknown outputs {unknown}; outputs: {sorted(names)}"
        )
    for out in outputs:
        if out.aggregate.needs_expected and out.name not in balance.expected:
            raise InvalidValueError(
                f"pf.balance needs the expected value of {out.name!r} "
                f"(e.g. pf.balance(rows={balance.rows:g}, {out.name}=...)): its relative error "
                "depends on its size"
            )

    def size(out: Output) -> float | None:
        return balance.expected[out.name] if out.aggregate.needs_expected else None

    def terms_of(out: Output, c: Mapping[str, float]) -> dict[str, float]:
        return out.aggregate.balance_terms(c, balance.rows, size(out))

    terms = _terms(outputs, needs, limits, terms_of)
    return _fractions_by_key(outputs, terms, balanced_fractions), terms


def _rho_of(
    key: str, measurements: Sequence[Measurement], found: Sequence[QuantileMeasurement]
) -> float:
    """The ρ a measurement (Gaussian or quantile) was given."""
    rhos = {m.key: m.exact_share for m in measurements} | {m.key: m.exact_share for m in found}
    return float(rhos[key])


_Measured = tuple[list[Measurement], list[QuantileMeasurement], tuple[str, ...]]
"""The measurements, the quantiles, and the keys of those raised to the sampler's floor."""


def _measure(
    budget: Share, shares: Mapping[str, Fraction], limits: Limits, needs: Mapping[str, Need]
) -> _Measured:
    """Every measurement at its exact share budget·share/total; NoiseRangeError if one cannot be.

    The shares add up to exactly the budget, and each noise is calibrated to its exact share,
    or raised to the sampler's smallest scale (:func:`_raised`) when its share asks for less.
    """
    total = sum(shares.values(), Fraction(0))
    measurements: list[Measurement] = []
    chosen_quantiles: list[QuantileMeasurement] = []
    for key, share in shares.items():
        measured = needs[key].measure(limits, budget.times(share / total))
        if isinstance(measured, QuantileMeasurement):
            chosen_quantiles.append(measured)
        elif isinstance(measured, Measurement):
            measurements.append(measured)
        else:  # a need's measure returns one of the two mechanisms the pipeline runs
            raise TypeError(f"{key}: a need measured {type(measured).__name__}")
    raised = tuple(m.key for m in measurements if m.scale_units < _SAMPLER_RANGE[m.family][0])
    measurements = [_raised(m) for m in measurements]
    for m in measurements:
        # Post-processing squares σ (mean and variance errors): refuse, before anything
        # is charged, a scale whose square would overflow.
        if not m.sigma < 1e150:
            raise NoiseRangeError(f"{m.key} would need noise of scale {m.sigma:.3g}")
        # Refuse here, before anything is charged, what the sampler would refuse later.
        high = _SAMPLER_RANGE[m.family][1]
        if not m.scale_units <= high:
            raise NoiseRangeError(
                f"{m.key} would need a noise scale of {m.scale_units:.6g} grid units, above "
                f"the exact sampler's largest {high:.4g}"
            )
    return measurements, chosen_quantiles, raised


_SAMPLER_RANGE: dict[Family, tuple[float, float]] = {
    "gaussian": (MIN_SIGMA, MAX_SIGMA),
    "laplace": (MIN_LAPLACE_SCALE, MAX_LAPLACE_SCALE),
}


def _raised(m: Measurement) -> Measurement:
    """``m`` with its noise raised to the sampler's smallest scale, if its share asks for less.

    A share so large that its calibrated scale is below the exact sampler's
    minimum (:data:`~privframe.mechanisms.noise.MIN_SIGMA` = 2^-20 grid units
    for the discrete Gaussian, :data:`~privframe.mechanisms.noise.MIN_LAPLACE_SCALE`
    = 2^-10 for the discrete Laplace) gets the minimum instead. More noise than
    the share needs is still private at that share: the Gaussian at σ' >= σ is
    Δ²/(2σ'²) <= ρ-zCDP (Bun & Steinke 2016, Prop. 1.6), the Laplace at b' >= b
    is Δ₁/b' <= ε-DP; the share stays what the ledger entry records (an (ε, δ)
    session's tight composition, which reads the mechanisms' events, may count
    less). The std bound scales with the scale, rounded up. At these floors the noise is 0 but with
    probability below 2e-22 (Gaussian) or 2e-444 (Laplace): such a release
    gives the exact answer on its grid.
    """
    low = _SAMPLER_RANGE[m.family][0]
    if m.scale_units >= low:
        return m
    sigma = round_up(Fraction(m.sigma_units) * Fraction(low) / Fraction(m.scale_units))
    return dataclasses.replace(m, scale_units=low, sigma_units=sigma)


_EXPONENT_STEP = 16  # the scan for a working ρ: every 16th power of two, then bisection
_LARGEST_EXPONENT = 1023  # 2^1023, the largest power of two a float holds


def _working_exponents(works: Callable[[Fraction], bool]) -> tuple[int, int] | None:
    """The least and greatest e with ``works(2**e)`` among the float range's powers of two.

    Scans every 16th exponent, then bisects each edge; assumes the exponents that
    work form an interval (too little noise above it, too much below), as they
    do for the planner's checks. None if no scanned exponent works.
    """
    scanned = [e for e in range(-1070, 1024, _EXPONENT_STEP) if works(Fraction(2) ** e)]
    if not scanned:
        return None

    def edge(good: int, bad: int) -> int:
        while abs(good - bad) > 1:
            middle = (good + bad) // 2
            good, bad = (middle, bad) if works(Fraction(2) ** middle) else (good, middle)
        return good

    low = edge(scanned[0], max(scanned[0] - _EXPONENT_STEP, -1075))
    high = edge(scanned[-1], min(scanned[-1] + _EXPONENT_STEP, _LARGEST_EXPONENT + 1))
    return low, high


def _two_digits(x: float, *, up: bool) -> str:
    """``x`` to two significant digits, rounded up or down (so the advice it gives holds)."""
    d = Decimal(x)
    exponent = d.adjusted() - 1
    digits = d.scaleb(-exponent).to_integral_value(ROUND_CEILING if up else ROUND_FLOOR)
    return f"{float(digits.scaleb(exponent)):.2g}"  # the two digits, exactly


def _out_of_range(
    rho: Fraction, reason: str, measure: Callable[[Fraction], _Measured], name: str = "rho"
) -> Exception:
    """The error for a budget at which some measurement cannot be drawn: the cause, and the fix.

    ``name`` is the budget's parameter: ``rho``, or ``epsilon`` under pure DP.
    """

    def works(candidate: Fraction) -> bool:
        try:
            measure(candidate)
        except NoiseRangeError:
            return False
        return True

    found = _working_exponents(works)
    if found is None:
        return InvalidValueError(
            f"{reason}, and no {name} makes this query work: its bounds or contribution limits "
            "are too extreme; rescale the columns and their bounds (e.g. to thousands or "
            "millionths), or lower the contribution limits"
        )
    low, high = (math.ldexp(1.0, e) for e in found)
    if low <= rho <= high:  # not expected: the failure is not a matter of rho
        return InvalidValueError(
            f"{reason}; rescale the columns and their bounds, or change the contribution limits"
        )
    size = "small" if rho < low else "large"
    article = "a" if name == "rho" else "an"
    # Too little noise is raised to the sampler's floor, so most plans have no upper end.
    upper = f" to {_two_digits(high, up=False)}" if found[1] < _LARGEST_EXPONENT else " up"
    return InvalidBudgetError(
        f"{name}={float(rho):.3g} is too {size} for exact noise at these bounds and contribution "
        f"limits: {reason}. This query can be released with {name} from "
        f"{_two_digits(low, up=True)}{upper}; use {article} {name} in "
        "that range" + (", or lower the contribution limits" if size == "small" else "")
    )


def plan_release(
    plan: Plan,
    has_unit: bool,
    rho: Number,
    weights: Mapping[str, float] | Balance | None = None,
    delta: Number | None = None,
) -> ReleasePlan:
    """Derive limits, measurements, the ρ split and σ for releasing ``plan`` at ``rho`` (zCDP).

    ``rho`` and ``delta`` are budgets, read exactly
    (:func:`privframe.accounting.exact`: ``0.1`` is 1/10). Each measurement's
    share is exactly ρ·f/(Σ f) for the split's fractions f (floats, read as
    exact rationals), its σ is calibrated to that exact share (rounded up, so
    Δ²/(2σ²) <= share), and the plan's cost is the exact sum of the shares
    charged: exactly ρ (a quantile is charged its whole share, which its cost does
    not exceed, its η capped or not).

    ``weights`` maps output names to weights (default 1): the split minimises
    Σ w²·(variance relative to the output's best alone)
    (:func:`~privframe.plan.split.weighted_fractions`), so outputs sharing no
    measurement get ρ in proportion to their weights. Or it is a
    :class:`~privframe.plan.split.Balance` to balance relative error. A plan that
    groups by a column without public keys also gets a :class:`Selection`, which
    needs ``delta`` and takes the average output's share of ρ as one more output.

    Raises:
        InvalidBudgetError: ``rho`` is not a positive number, or is so small
            that some measurement's noise would exceed the exact sampler's
            largest scale (the message gives the rho that works). A rho so
            large that a noise falls below the sampler's smallest scale is
            not refused: that noise is raised to the smallest scale, and
            ``explain`` says so on its line.
    """
    rho = exact("rho", rho, positive=True)
    if plan.aggregates and selects(plan) and not delta:
        raise InvalidBudgetError(
            "choosing groups privately needs a delta > 0 (give the session a budget such as "
            "pf.zCDP(rho=1.0, delta=1e-7), or pass public keys: group_by(..., keys=[...]))"
        )
    return _plan(plan, has_unit, Share(rho), weights, delta)


def plan_pure_release(
    plan: Plan,
    has_unit: bool,
    epsilon: Number,
    weights: Mapping[str, float] | Balance | None = None,
) -> ReleasePlan:
    """Derive limits, measurements, the ε split and the Laplace scales for a pure ε-DP release.

    Each measurement's share is exactly ε·f/(Σ f) for the split's fractions f,
    its discrete Laplace scale b is Δ₁/share rounded up (so the measurement is
    (Δ₁/b)-DP with Δ₁/b <= share), a quantile's exponential mechanism is
    charged its whole share of ε, and the shares add up to exactly ε (basic
    composition, Dwork & Roth 2014, Thm. 3.16): the cost is ``PureDP(epsilon)``.
    The split's fractions are the zCDP split's: any split is private, and
    that one is close to the best for the Laplace's variance too.

    Raises:
        InvalidBudgetError: ``epsilon`` is not a positive number or is so
            small that a noise would exceed the sampler's largest scale (a
            noise below its smallest is raised to it), or the plan
            chooses its groups privately, which pure DP cannot do (a group
            held by the added unit alone appears with a probability that no
            ε bounds).
        InvalidArgumentError: ``weights`` is a ``pf.balance``, which balances
            the relative errors of Gaussian noise.

    Example:
        >>> import privframe as pf
        >>> from privframe.plan.ir import Bound, Plan
        >>> release = plan_pure_release(Plan(aggregates=(pf.count(),)), False, 0.5)
        >>> release.cost, release.measurements[0].scale_units
        (PureDP(epsilon=0.5), 2.0)
    """
    epsilon = exact("epsilon", epsilon, positive=True)
    if selects(plan):
        raise InvalidBudgetError(
            f"choosing groups privately (group_by columns {list(plan.selected)} without public "
            "keys) needs a delta > 0, and a pure-DP budget (PureDP) has none: pass public keys, "
            "group_by(..., keys=[...]), or open the session with an (epsilon, delta) budget, "
            "budget=pf.ApproxDP(epsilon=..., delta=...)"
        )
    if isinstance(weights, Balance):
        raise InvalidArgumentError(
            "pf.balance balances the relative errors of Gaussian noise (a zCDP budget); under "
            "pure DP pass weights={output: weight, ...} instead"
        )
    return _plan(plan, has_unit, Share(epsilon, "laplace"), weights, None)


def plan_approx_release(
    plan: Plan,
    has_unit: bool,
    epsilon: Number,
    delta: Number,
    weights: Mapping[str, float] | Balance | None = None,
) -> ReleasePlan:
    """Plan an (ε, δ)-DP release with the noise that gives the smaller error.

    Two releases are planned and the better one kept; either way the cost is
    ``ApproxDP(epsilon, delta)``, what was asked:

    * **Laplace**: the pure ε-DP release of :func:`plan_pure_release` (δ is
      not needed); not for a plan that chooses its groups privately or
      balances relative error.
    * **Gaussian**, when δ > 0: the zCDP release at the largest ρ whose
      tightest (ε, δ') conversion is within ε (Canonne, Kamath & Steinke
      2020, Prop. 14: :meth:`zCDP.from_approx_dp
      <privframe.accounting.budgets.zCDP.from_approx_dp>`), with δ' = δ; or,
      for a plan that chooses its groups privately, δ' = δ/2 and the other
      δ/2 spent on that choice, a (ρ, δ/2)-approximate-zCDP release, which is
      (ε, δ)-DP. privframe's discrete Gaussian of a vector is known to be
      ρ-zCDP (Canonne, Kamath & Steinke 2020, Thm. 14); Balle & Wang's
      analytic calibration is exact for the continuous Gaussian and is not
      proven for it, so it is not used.

    The one whose noise is smaller (the geometric mean, over measurements, of
    their std bounds, and of the quantiles' rank errors) is kept; ``choice``
    says which and by how much.

    Raises:
        InvalidBudgetError: ``epsilon`` not positive or ``delta`` not in
            [0, 1); no noise can be drawn at this budget; or ``delta`` is 0 for a
            plan that chooses its groups privately.

    Example:
        >>> import privframe as pf
        >>> from privframe.plan.ir import Bound, Plan
        >>> release = plan_approx_release(Plan(aggregates=(pf.count(),)), False, 1.0, 1e-6)
        >>> release.cost, release.family
        (ApproxDP(epsilon=1.0, delta=1e-06), 'laplace')
    """
    cost = ApproxDP(exact("epsilon", epsilon, positive=True), delta)
    epsilon, delta = cost.exact_epsilon, cost.exact_delta
    selecting = selects(plan)
    if plan.aggregates and selecting and not delta:
        raise InvalidBudgetError(
            f"choosing groups privately (group_by columns {list(plan.selected)} without public "
            "keys) spends delta: release with delta=... (or pass public keys, "
            "group_by(..., keys=[...]))"
        )
    if isinstance(weights, Balance) and not delta:
        raise InvalidArgumentError(
            "pf.balance balances the relative errors of Gaussian noise, which needs delta: "
            "release with delta=..., or pass weights={output: weight, ...}"
        )
    candidates: list[ReleasePlan] = []
    failures: list[InvalidBudgetError | InvalidValueError] = []
    if not selecting and not isinstance(weights, Balance):
        try:
            candidates.append(plan_pure_release(plan, has_unit, epsilon, weights))
        except (InvalidBudgetError, InvalidValueError) as err:
            failures.append(err)
    if delta:
        selection_delta = delta / 2 if selecting else None
        rho = zCDP.from_approx_dp(epsilon, delta - (selection_delta or 0)).exact_rho
        try:
            candidates.append(plan_release(plan, has_unit, rho, weights, selection_delta))
        except (InvalidBudgetError, InvalidValueError) as err:
            failures.append(err)
    if not candidates:
        raise failures[0]
    best = min(candidates, key=_noise_level)
    return dataclasses.replace(best, cost=cost, choice=_choice(best, candidates, epsilon))


def _noise_level(release: ReleasePlan) -> float:
    """The mean log of the measurements' std bounds and the quantiles' rank errors."""
    logs = [math.log(m.sigma) for m in release.measurements]
    logs += [math.log(q.rank_error()) for q in release.quantiles]
    if release.selection is not None:
        logs.append(math.log(release.selection.measurement.sigma))
    return sum(logs) / len(logs)


def _choice(best: ReleasePlan, candidates: Sequence[ReleasePlan], epsilon: Fraction) -> str:
    """Which noise an (ε, δ) release draws and why, for ``explain``."""
    if best.family == "laplace":
        chosen = f"Laplace noise (pure epsilon={float(epsilon):.6g}-DP)"
    else:
        selected = () if best.selection is None else (best.selection.measurement,)
        rho = sum((m.exact_share for m in (*best.measurements, *selected)), Fraction(0))
        rho += sum((q.exact_share for q in best.quantiles), Fraction(0))
        chosen = (
            f"Gaussian noise (rho={float(rho):.6g}-zCDP, the most whose (epsilon, delta) "
            "conversion fits)"
        )
    others = [c for c in candidates if c is not best]
    if not others:
        return f"{chosen}; the other noise cannot release this query at this budget"
    ratio = math.exp(_noise_level(others[0]) - _noise_level(best))
    return f"{chosen}: {ratio:.3g}× less noise than {others[0].family.capitalize()} noise"


def _plan(
    plan: Plan,
    has_unit: bool,
    budget: Share,
    weights: Mapping[str, float] | Balance | None,
    delta: Number | None,
) -> ReleasePlan:
    """The release at ``budget`` (exact), its key selection (if any) spending ``delta``."""
    if not plan.aggregates:
        raise InvalidValueError("the query has no aggregates: add .agg(pf.count(), ...)")
    selecting = selects(plan)
    limits = resolve_limits(plan, has_unit)
    outputs = tuple(Output(a.output_name, a, a.keys()) for a in plan.aggregates)
    needs = {need.key: need for a in plan.aggregates for need in a.needs()}
    if isinstance(weights, Balance):
        shares, errors = _balanced(outputs, needs, limits, weights)
    else:
        shares, errors = _weights(outputs, needs, limits, weights), {}
    if selecting:
        # One more output's worth: the average share of the others.
        needs[SELECTION_KEY] = DistinctNeed(SELECTION_KEY)
        shares[SELECTION_KEY] = sum(shares.values(), Fraction(0)) / len(outputs)

    def measure(candidate: Fraction) -> _Measured:
        return _measure(Share(candidate, budget.family), shares, limits, needs)

    failure = None
    try:
        measurements, chosen_quantiles, raised = measure(budget.amount)
    except NoiseRangeError as err:
        failure = str(err)
    if failure is not None:
        raise _out_of_range(budget.amount, failure, measure, budget.parameter)
    spent = sum((m.exact_share for m in measurements), Fraction(0)) + sum(
        (m.exact_share for m in chosen_quantiles), Fraction(0)
    )
    found = tuple(chosen_quantiles)
    relative = tuple(
        (name, math.sqrt(sum(b / _rho_of(key, measurements, found) for key, b in row.items())))
        for name, row in errors.items()
    )
    family = budget.family
    if not selecting:
        cost = zCDP(spent) if family == "gaussian" else PureDP(spent)
        return ReleasePlan(
            limits, tuple(measurements), outputs, cost, None, found, relative, family, raised=raised
        )
    selection_delta = exact("delta", delta, positive=True)
    selected_cost = zCDP(spent, selection_delta)  # refuses a delta >= 1
    selection, kept = _selection(measurements, limits, selection_delta)
    return ReleasePlan(
        limits, kept, outputs, selected_cost, selection, found, relative, family, raised=raised
    )


def _selection(
    measurements: Sequence[Measurement], limits: Limits, delta: Fraction
) -> tuple[Selection, tuple[Measurement, ...]]:
    """The key selection (its threshold spends ``delta``, rounded down) and the rest."""
    chosen = next(m for m in measurements if m.key == SELECTION_KEY)
    threshold_delta = round_down(delta)
    selection = Selection(
        chosen,
        discrete_threshold(chosen.sigma_units, limits.max_groups, threshold_delta),
        threshold_delta,
    )
    return selection, tuple(m for m in measurements if m.key != SELECTION_KEY)
