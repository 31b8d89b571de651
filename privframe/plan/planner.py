"""The planner: from a query plan and ρ to measurements with derived sensitivity and noise.

This is where privacy is decided, and only here. The planner never sees data:
its inputs are the plan's public parameters (bounds, contribution limits,
keys) and the budget.

Sensitivity (``docs/sensitivity.md``; DP primer section 2): a privacy unit
contributes at most ``w_g <= m`` rows to each of at most ``k`` groups, and at
most ``M`` rows overall. Over all groups, ``sum_g w_g² <= S`` with
``S = q·m² + r²``, ``q = min(k, floor(M/m))`` full groups and ``r = M − q·m``
rows left (``r = 0`` when ``q = k``), or ``S = k·m²`` without ``M``. So the
L2 sensitivity of a grouped count vector is ``sqrt(S)``, and of a grouped sum
of values clipped to ``[L, U]`` it is ``sqrt(S)·max(|L|, |U|)``, or
``sqrt(S)·(U − L)/2`` for values centred on the midpoint.

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

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from fractions import Fraction
from typing import Literal

from scipy import special

from privframe.accounting._numbers import (
    Number,
    check_positive,
    exact,
    round_down,
    round_up,
    sqrt_up,
)
from privframe.accounting.budgets import zCDP
from privframe.accounting.calibration import gaussian_sigma
from privframe.api.query import Plan
from privframe.errors import (
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    PrivframeError,
)
from privframe.mechanisms import quantiles
from privframe.mechanisms.noise import MAX_SIGMA, MIN_SIGMA, discrete_gaussian_halfwidth
from privframe.mechanisms.selection import (
    discrete_tail,
    discrete_threshold,
    joint_selection_epsilon,
    standard_selection_epsilon,
)
from privframe.plan.aggregates import (
    Aggregate,
    Count,
    CountDistinct,
    Mean,
    Quantile,
    Std,
    Sum,
    Var,
    _Bounded,
)
from privframe.plan.split import Balance, balanced_fractions

__all__ = [
    "Explanation",
    "Limits",
    "Measurement",
    "Output",
    "QuantileMeasurement",
    "ReleasePlan",
    "Selection",
    "plan_release",
]

Z95 = 1.959963984540054
"""The standard normal's 97.5% quantile, for the approximate intervals of means."""

# Grid for sums: a row's clipped value is at most 2^32 grid units (so int64 sums
# of fewer than 2^31 rows cannot overflow), and the noise is at most 2^39 units (the
# sampler takes up to 2^40), so rounding each row costs at most σ·2^-40.
_ROW_UNITS_BITS = 32
_NOISE_UNITS_BITS = 39
# Grid widths stay at least 2^-1000: normal floats, and 2^j does not overflow.
_MAX_GRID_BITS = 1000


@dataclass(frozen=True)
class Limits:
    """Resolved contribution limits and the sum-of-squares bound S they imply."""

    max_groups: int
    max_rows_per_group: int
    max_rows: int | None
    squares: int  # S = max over contributions of sum_g w_g²

    def describe(self) -> str:
        """How S was derived, for ``explain``."""
        k, m, big_m = self.max_groups, self.max_rows_per_group, self.max_rows
        if big_m is None or big_m >= k * m:
            return f"k={k} groups × m={m} rows: S = k·m² = {self.squares}"
        q = min(k, big_m // m)
        r = big_m - q * m if q < k else 0
        return (
            f"k={k}, m={m}, M={big_m}: q={q} full groups + r={r} rows: "
            f"S = q·m² + r² = {self.squares}"
        )


@dataclass(frozen=True)
class Measurement:
    """One noisy vector a release draws: a count, a sum, or a centred sum, per key."""

    key: str
    kind: Literal["count", "distinct", "sum", "centred_sum", "centred_sum_sq"]
    column: str | None
    lower: float | None
    upper: float | None
    grid_exponent: int  # values are integers in units of 2^-j (0 for counts)
    lower_units: int
    upper_units: int
    centre_units: int
    row_units: int  # the most one row changes this measurement, in grid units
    l2_units: float  # sqrt(S)·row_units, rounded up
    exact_rho: Fraction  # its exact share of the release's ρ; σ is calibrated to it
    sigma_units: float
    derivation: str

    @property
    def rho(self) -> float:
        """The ρ share as the nearest float, for display; ``exact_rho`` is charged."""
        return float(self.exact_rho)

    @property
    def scale(self) -> float:
        """The grid width 2^-j: value units per grid unit."""
        return math.ldexp(1.0, -self.grid_exponent)

    @property
    def l2_sensitivity(self) -> float:
        """L2 sensitivity in value units."""
        return self.l2_units * self.scale

    @property
    def sigma(self) -> float:
        """Noise scale in value units (the std is at most this)."""
        return self.sigma_units * self.scale

    @property
    def ci95(self) -> float:
        """Half-width of the exact 95% interval of the noise, in value units."""
        return discrete_gaussian_halfwidth(self.sigma_units, 0.95) * self.scale


@dataclass(frozen=True)
class QuantileMeasurement:
    """One quantile per key, chosen by the exponential mechanism (:mod:`~.mechanisms.quantiles`).

    ``eta`` is the weight per row of rank distance; the cost over all groups
    is ρ = (η·max(q, 1 − q))²·S/2 rounded up to a float, ``exact_rho``, at
    most the share it was given.
    """

    key: str
    aggregate: Quantile
    exact_rho: Fraction
    eta: float
    derivation: str

    @property
    def rho(self) -> float:
        """The ρ charged for this quantile (a float: ``exact_rho`` is one)."""
        return float(self.exact_rho)

    def rank_error(self, probability: float = 0.95) -> float:
        """Rows of rank error beyond the best candidate's, at ``probability`` (public)."""
        return quantiles.rank_error(self.eta, self.aggregate.candidates, probability)


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
        return max(1, math.ceil(self.threshold + float(special.ndtri(probability)) * sigma))


@dataclass(frozen=True)
class ReleasePlan:
    """Everything a release needs except the data: limits, measurements, outputs, cost."""

    limits: Limits
    measurements: tuple[Measurement, ...]
    outputs: tuple[Output, ...]
    cost: zCDP
    selection: Selection | None = None
    quantiles: tuple[QuantileMeasurement, ...] = ()
    relative_errors: tuple[tuple[str, float], ...] = ()  # with a Balance: per output

    def measurement(self, key: str) -> Measurement:
        """The Gaussian measurement with this key."""
        return next(m for m in self.measurements if m.key == key)

    def quantile(self, key: str) -> QuantileMeasurement:
        """The quantile measurement with this key."""
        return next(m for m in self.quantiles if m.key == key)


ACCOUNTING_NOTE = (
    "accounting: zCDP; a release's rho adds to the session's, and the session states "
    "(epsilon, delta) with the conversion valid for every rho-zCDP mechanism (Canonne, Kamath "
    "& Steinke 2020, Cor. 13); Session.guarantee(method='rdp' or 'pld') replays the "
    "ledger's mechanism events instead"
)
"""How a release is accounted; printed by :class:`Explanation` and its HTML view."""


@dataclass(frozen=True)
class Explanation:
    """What a release would do, from public parameters only; ``str()`` prints a table.

    Attributes:
        plan: the release plan (sensitivities, ρ split, σ).
        rows: per output: name, measurements, ρ, std and 95% half-width.
    """

    plan: ReleasePlan
    rows: tuple[dict[str, object], ...]
    report_delta: float | None = None
    notes: tuple[str, ...] = ()  # e.g. the SQL front end's post-processing

    @property
    def measurements(self) -> tuple[Measurement, ...]:
        """The measurements of the plan."""
        return self.plan.measurements

    def __str__(self) -> str:
        cost = self.plan.cost
        delta = f", delta = {cost.delta:.3g}" if cost.delta else ""
        lines = [
            f"release costs rho = {cost.rho:.6g}{delta} (zCDP)",
            ACCOUNTING_NOTE,
            f"contribution bound: {self.plan.limits.describe()}",
            "",
            "measurements:",
        ]
        selection = self.plan.selection
        if selection is not None:
            m = selection.measurement
            lines.append(
                f"  {m.key}: {m.derivation}; rho = {m.rho:.6g}, sigma = {m.sigma:.6g}; "
                f"a group is kept iff its noisy count >= {selection.threshold} "
                f"(delta = {selection.delta:.3g}); kept with 50% at "
                f"{selection.survival_count(0.5)} units, 95% at {selection.survival_count(0.95)}"
            )
            if self.report_delta is not None:
                lines.append("  " + self.single_release(selection))
        for m in self.plan.measurements:
            lines.append(
                f"  {m.key}: {m.derivation}; rho = {m.rho:.6g}, "
                f"sigma = {m.sigma:.6g}, 95% ± {m.ci95:.6g}"
            )
        for qm in self.plan.quantiles:
            lines.append(f"  {qm.key}: {qm.derivation}; rho = {qm.rho:.6g}")
        if self.plan.relative_errors:
            lines += [
                "",
                "split: balanced relative error (from the public guesses of pf.balance); "
                "expected 95% relative error per output: "
                + ", ".join(f"{name} {err:.3g}" for name, err in self.plan.relative_errors),
            ]
        lines += ["", "outputs:"]
        for row in self.rows:
            lines.append(f"  {row['output']}: std {row['std']}, 95% ± {row['ci95']}")
        if self.notes:
            lines += ["", "notes:", *(f"  {note}" for note in self.notes)]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """Notebook view: the explanation as tables."""
        from privframe.api.html import explanation_html

        return explanation_html(self)

    def single_release(self, selection: Selection) -> str:
        """This release alone as (ε, δ), by the standard and the joint analysis.

        Needs ``report_delta`` (set by ``Query.explain``).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> df = pl.DataFrame({"u": list(range(40)), "g": ["a", "b"] * 20})
            >>> sess = pf.Session(df, "u", pf.zCDP(1.0, delta=1e-6))
            >>> e = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("g").agg(
            ...     pf.count()).explain(rho=0.5)
            >>> e.single_release(e.plan.selection).startswith("this release alone")
            True
        """
        assert self.report_delta is not None
        total = self.report_delta + selection.delta
        rho, k, p = (
            round_up(self.plan.cost.exact_rho),
            self.plan.limits.max_groups,
            selection.single_unit_survival(),
        )
        standard = standard_selection_epsilon(total, rho, k, p)
        joint = joint_selection_epsilon(total, rho, k, p)
        return (
            f"this release alone at delta = {total:.3g}: epsilon = {standard:.4g} by the "
            f"standard analysis, {joint:.4g} by the joint analysis of selection and values "
            "(Wilkins et al. 2023; docs/privacy.md §6)"
        )


def resolve_limits(plan: Plan, has_unit: bool) -> Limits:
    """Contribution limits from the plan (each row is its own unit without a unit column)."""
    n_groups = plan.n_groups or 1
    if not has_unit:
        return Limits(1, 1, None, 1)
    bound = plan.bound
    if _selects(plan) and (bound is None or bound.max_groups is None):
        raise InvalidValueError(
            "choosing groups privately (group_by without keys) needs .bound(max_groups=...): "
            "with no public key list there is no other bound on a unit's groups"
        )
    if _selects(plan):
        n_groups = bound.max_groups  # type: ignore[union-attr]
    if bound is None:
        raise InvalidValueError(
            "a query over a privacy unit needs contribution limits: call "
            ".bound(max_groups=..., max_rows_per_group=...) (and optionally max_rows=...)"
        )
    if bound.max_rows_per_group is None and bound.max_rows is None:
        raise InvalidValueError(
            "the contribution limits have no row limit: max_rows_per_group is missing (the most "
            "rows one privacy unit adds to one group, e.g. .bound(max_groups=3, "
            "max_rows_per_group=5), or pf.Bound(...) the same way); or give max_rows (the most "
            "rows one unit adds in all)"
        )
    m = bound.max_rows_per_group or bound.max_rows
    assert m is not None
    big_m = bound.max_rows
    if big_m is not None:
        m = min(m, big_m)
    k = min(bound.max_groups or n_groups, n_groups)
    if big_m is None or big_m >= k * m:
        return Limits(k, m, big_m, k * m * m)
    q = min(k, big_m // m)
    r = big_m - q * m if q < k else 0
    return Limits(k, m, big_m, q * m * m + r * r)


def _measurements_of(agg: Aggregate) -> tuple[str, ...]:
    if isinstance(agg, Count):
        return ("count",)
    if isinstance(agg, CountDistinct):
        return (_DISTINCT,)
    if isinstance(agg, Sum):
        return (_value_key("sum", agg),)
    if isinstance(agg, Mean):
        return (_value_key("centred_sum", agg), "count")
    if isinstance(agg, Var):  # and Std
        return (_value_key("centred_sum_sq", agg), _value_key("centred_sum", agg), "count")
    if isinstance(agg, Quantile):
        return (
            f"quantile({agg.column}, q={agg.q!r}, [{_exact(agg.lower)}, {_exact(agg.upper)}], "
            f"{agg.candidates} candidates)",
        )
    raise InvalidArgumentError(f"unknown aggregate {agg!r}")


ValueKind = Literal["sum", "centred_sum", "centred_sum_sq"]


def _value_key(kind: ValueKind, agg: _Bounded) -> str:
    """A measurement's key: two aggregates share a measurement iff their keys are equal."""
    return f"{kind}({agg.column}, [{_exact(agg.lower)}, {_exact(agg.upper)}])"


def _exact(x: float) -> str:
    """Short when that is exact (1000, not 1000.0), else the float's full repr."""
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


def _weights(outputs: Sequence[Output], weights: Mapping[str, float] | None) -> dict[str, Fraction]:
    """Each output's weight, spread evenly over the measurements it uses."""
    if weights is not None and not isinstance(weights, Mapping):
        raise InvalidArgumentError(
            f"weights must map output names to numbers, got {type(weights).__name__}"
        )
    given = dict(weights or {})
    names = {o.name for o in outputs}
    unknown = sorted(set(given) - names)
    if unknown:
        raise InvalidValueError(f"weights name unknown outputs {unknown}; outputs: {sorted(names)}")
    per_measurement: dict[str, Fraction] = {}
    for out in outputs:
        w = Fraction(check_positive(f"weight of {out.name!r}", given.get(out.name, 1.0)))
        for key in out.measurements:
            per_measurement[key] = per_measurement.get(key, Fraction(0)) + w / len(out.measurements)
    return per_measurement


def _variance_coefficients(outputs: Sequence[Output], limits: Limits) -> dict[str, float]:
    """Per measurement, c with a squared 95% error of c/ρ_m (value units; ranks for quantiles).

    Gaussian measurements: (1.96σ)² with σ² = Δ²/(2ρ). Quantiles: the 95% rank
    error is (ln N + ln 20)/η with η² = 2ρ/(S·max(q, 1 − q)²).
    """
    squares = limits.squares
    coefficients: dict[str, float] = {}
    for out in outputs:
        agg = out.aggregate
        for key in out.measurements:
            if key == "count":
                c = squares / 2.0
            elif key == _DISTINCT:
                c = limits.max_groups / 2
            elif isinstance(agg, Quantile):
                spread = max(agg.q, 1 - agg.q) * quantiles.rank_error(1.0, agg.candidates)
                c = spread * spread * squares / 2
            else:
                assert isinstance(agg, _Bounded)
                half = agg.upper / 2 - agg.lower / 2
                if key.startswith("sum("):
                    row = agg.magnitude
                elif key.startswith("centred_sum_sq("):
                    row = half * half / 2
                else:
                    row = half
                c = squares * row * row / 2
            coefficients[key] = c if isinstance(agg, Quantile) else Z95 * Z95 * c
    return coefficients


def _balanced(
    outputs: Sequence[Output], limits: Limits, balance: Balance
) -> tuple[dict[str, Fraction], dict[str, dict[str, float]]]:
    """Shares that minimise the largest first-order relative error, and each output's terms.

    Output i's squared relative error is Σ_m b_im/ρ_m (``privframe.plan.split``):
    count σ_N/rows; sum and distinct count σ/expected; mean (σ_C² +
    (μ − mid)²σ_N²)/(rows·μ)²; variance (σ_Q/rows)² + (V·σ_N/rows)² +
    (2·hw·σ_C/rows)² over V² (|μ − a| at most the half-width hw); a standard
    deviation is half its variance's relative error; quantiles rank error/rows.
    """
    names = {o.name for o in outputs}
    unknown = sorted(set(balance.expected) - names)
    if unknown:
        raise InvalidValueError(
            f"pf.balance names unknown outputs {unknown}; outputs: {sorted(names)}"
        )
    c = _variance_coefficients(outputs, limits)
    rows = balance.rows
    terms: dict[str, dict[str, float]] = {}
    for out in outputs:
        agg = out.aggregate
        if isinstance(agg, Count | Quantile):
            terms[out.name] = {out.measurements[0]: c[out.measurements[0]] / rows**2}
            continue
        if out.name not in balance.expected:
            raise InvalidValueError(
                f"pf.balance needs the expected value of {out.name!r} "
                f"(e.g. pf.balance(rows={rows:g}, {out.name}=...)): its relative error "
                "depends on its size"
            )
        e = balance.expected[out.name]
        keys = out.measurements
        if isinstance(agg, Var):
            v = e * e if isinstance(agg, Std) else e
            hw = agg.upper / 2 - agg.lower / 2
            scale = 0.25 if isinstance(agg, Std) else 1.0  # std: half the relative error
            terms[out.name] = {
                keys[0]: scale * c[keys[0]] / (rows * v) ** 2,
                keys[1]: scale * 4 * hw * hw * c[keys[1]] / (rows * v) ** 2,
                keys[2]: scale * c[keys[2]] / rows**2,
            }
        elif isinstance(agg, Mean):
            mid = float(agg.midpoint)
            terms[out.name] = {
                keys[0]: c[keys[0]] / (rows * e) ** 2,
                keys[1]: (e - mid) ** 2 * c[keys[1]] / (rows * e) ** 2,
            }
        else:  # Sum, CountDistinct
            terms[out.name] = {keys[0]: c[keys[0]] / e**2}
    order = list(dict.fromkeys(k for out in outputs for k in out.measurements))
    matrix = [[row.get(k, 0.0) for k in order] for row in terms.values()]
    fractions = balanced_fractions(matrix)
    shares = {k: Fraction(f) for k, f in zip(order, fractions, strict=True)}
    return shares, terms


def _rho_of(
    key: str, measurements: Sequence[Measurement], found: Sequence[QuantileMeasurement]
) -> float:
    """The ρ a measurement (Gaussian or quantile) was given."""
    return next(m.rho for m in (*measurements, *found) if m.key == key)


def _grid_exponent(row_magnitude: float, sigma_estimate: float) -> int:
    """J with 2^-j the smallest power of two >= max(B·2^-32, σ·2^-39)."""
    target = max(
        math.ldexp(row_magnitude, -_ROW_UNITS_BITS), math.ldexp(sigma_estimate, -_NOISE_UNITS_BITS)
    )
    if target == 0:  # subnormal bounds underflow: finer than any grid privframe draws on
        return _MAX_GRID_BITS + 1
    return -math.ceil(math.log2(target))


_SELECTION = "distinct units (selection)"
_DISTINCT = "distinct units"


class _NoiseRangeError(Exception):
    """A measurement cannot be drawn exactly at its ρ share (too little or too much noise)."""


def _sigma(l2: float, rho: Fraction, key: str) -> float:
    """σ calibrated to the exact share ``rho`` (rounded up: Δ²/(2σ²) <= ρ exactly)."""
    try:
        return gaussian_sigma(l2, rho)
    except PrivframeError:
        reason = f"{key} would need noise beyond the float range"
    raise _NoiseRangeError(reason)


def _integer_measurement(
    key: str, kind: Literal["count", "distinct"], squares: int, symbol: str, rho: Fraction
) -> Measurement:
    """A per-group integer count whose L2 sensitivity is sqrt(squares)."""
    l2 = sqrt_up(Fraction(squares))
    return Measurement(
        key=key,
        kind=kind,
        column=None,
        lower=None,
        upper=None,
        grid_exponent=0,
        lower_units=0,
        upper_units=1,
        centre_units=0,
        row_units=1,
        l2_units=l2,
        exact_rho=rho,
        sigma_units=_sigma(l2, rho, key),
        derivation=f"sensitivity sqrt({symbol}) = sqrt({squares}) = {l2:.6g}",
    )


def _distinct_measurement(key: str, limits: Limits, rho: Fraction) -> Measurement:
    """Distinct units per group: each unit adds 1 to at most k groups."""
    return _integer_measurement(key, "distinct", limits.max_groups, "k", rho)


def _count_measurement(limits: Limits, rho: Fraction) -> Measurement:
    """Rows per group: a unit's weights w_g satisfy sum_g w_g² <= S."""
    return _integer_measurement("count", "count", limits.squares, "S", rho)


def _value_measurement(
    key: str, kind: ValueKind, agg: _Bounded, limits: Limits, rho: Fraction
) -> Measurement:
    """A sum of per-row values in [low, high], snapped to a grid chosen from public numbers.

    Sums add the clipped values; centred sums add them about the midpoint of
    their grid range; sums of squares add (x − midpoint)² ∈ [0, ((U − L)/2)²],
    also about the middle of that range. With the per-row bound R in grid
    units, the grouped vector's L2 sensitivity is sqrt(S)·R.
    """
    half_width = agg.upper / 2 - agg.lower / 2  # no overflow near the float range
    squares = kind == "centred_sum_sq"
    if squares:
        low, high = 0.0, half_width * half_width
        spread, formula = high / 2, f"sqrt(S)·((U−L)/2)²/2 = sqrt({limits.squares})·{high / 2:g}"
    elif kind == "sum":
        low, high = agg.lower, agg.upper
        spread = agg.magnitude
        formula = f"sqrt(S)·max(|L|,|U|) = sqrt({limits.squares})·{agg.magnitude:g}"
    else:
        low, high = agg.lower, agg.upper
        spread, formula = half_width, f"sqrt(S)·(U−L)/2 = sqrt({limits.squares})·{half_width:g}"
    scale = max(abs(low), abs(high))
    rho_f = round_down(rho)
    estimate = math.sqrt(limits.squares) * spread / math.sqrt(2 * rho_f) if rho_f else math.inf
    if (
        not (high > low and math.isfinite(estimate))
        or _grid_exponent(scale, estimate) > _MAX_GRID_BITS
    ):
        raise _NoiseRangeError(
            f"the bounds ({agg.lower:g}, {agg.upper:g}) of column {agg.column!r} are too "
            f"extreme for {'a variance' if squares else 'exact arithmetic'} at its rho share "
            f"{float(rho):.3g}"
        )
    j = _grid_exponent(scale, estimate)
    lo = round(math.ldexp(low, j))
    # Squares: the range's top rounded up, so no square is cut by the integer clip.
    hi = math.ceil(math.ldexp(high, j)) if squares else round(math.ldexp(high, j))
    if kind == "sum":
        centre, row_units = 0, max(abs(lo), abs(hi))
    else:
        centre = (lo + hi) // 2
        row_units = max(centre - lo, hi - centre)
    if row_units == 0:
        raise _NoiseRangeError(
            f"at its rho share {float(rho):.3g}, the noise of {key} would exceed the bounds of "
            f"column {agg.column!r} 2^39 times over"
        )
    l2 = sqrt_up(Fraction(limits.squares) * row_units * row_units)
    noun = "squares" if squares else "values"
    return Measurement(
        key=key,
        kind=kind,
        column=agg.column,
        lower=agg.lower,
        upper=agg.upper,
        grid_exponent=j,
        lower_units=lo,
        upper_units=hi,
        centre_units=centre,
        row_units=row_units,
        l2_units=l2,
        exact_rho=rho,
        sigma_units=_sigma(l2, rho, key),
        derivation=(
            f"sensitivity {formula} = {math.ldexp(l2, -j):.6g} ({noun} on the grid 2^{-j})"
        ),
    )


def _quantile_measurement(
    key: str, agg: Quantile, limits: Limits, rho: Fraction
) -> QuantileMeasurement:
    """The exponential mechanism's η for one quantile at ``rho``; its cost is recomputed exactly.

    η is found for ``rho`` rounded down to a float and its exact cost rounded
    up to a float: at most that float, hence at most ``rho``.
    """
    failure = None
    try:
        eta = quantiles.scale(round_down(rho), agg.q, limits.squares)
    except PrivframeError:
        failure = (
            f"the contribution limits are too large for {key} at its rho share "
            f"{float(rho):.3g}: its choice would be all but uniform"
        )
    if failure is not None:
        raise _NoiseRangeError(failure)
    spent = round_up(quantiles.cost(eta, agg.q, limits.squares))
    spread = max(agg.q, 1 - agg.q)
    return QuantileMeasurement(
        key=key,
        aggregate=agg,
        exact_rho=Fraction(spent),
        eta=eta,
        derivation=(
            f"exponential mechanism over {agg.candidates} candidates (spacing {agg.spacing:.6g}); "
            f"a unit moves each rank distance by <= max(q,1−q)·w_g rows, so rho = "
            f"(eta·{spread:g})²·S/2 with S = {limits.squares}: eta = {eta:.6g} per row; "
            f"95% rank error <= {quantiles.rank_error(eta, agg.candidates):.4g} rows "
            "beyond the nearest candidate"
        ),
    )


def _selects(plan: Plan) -> bool:
    return bool(plan.group_by) and plan.keys is None


_Measured = tuple[list[Measurement], list[QuantileMeasurement]]


def _measure(
    rho: Fraction,
    shares: Mapping[str, Fraction],
    limits: Limits,
    asked: Mapping[str, Quantile],
    values: Mapping[str, tuple[ValueKind, _Bounded]],
) -> _Measured:
    """Every measurement at its exact share ρ·share/total; _NoiseRangeError if one cannot be drawn.

    The shares add up to exactly ρ, and each σ is calibrated to its exact share.
    """
    total = sum(shares.values(), Fraction(0))
    measurements = []
    chosen_quantiles = []
    for key, share in shares.items():
        rho_i = rho * share / total
        if key in asked:
            chosen_quantiles.append(_quantile_measurement(key, asked[key], limits, rho_i))
        elif key in (_SELECTION, _DISTINCT):
            measurements.append(_distinct_measurement(key, limits, rho_i))
        elif key == "count":
            measurements.append(_count_measurement(limits, rho_i))
        else:
            kind, agg = values[key]
            measurements.append(_value_measurement(key, kind, agg, limits, rho_i))
    for m in measurements:
        # Post-processing squares σ (mean and variance errors): refuse, before anything
        # is charged, a scale whose square would overflow.
        if not m.sigma < 1e150:
            raise _NoiseRangeError(f"{m.key} would need noise of scale {m.sigma:.3g}")
        # Refuse here, before anything is charged, what the sampler would refuse later.
        if not MIN_SIGMA <= m.sigma_units <= MAX_SIGMA:
            raise _NoiseRangeError(
                f"{m.key} would need a noise scale of {m.sigma_units:.6g} grid units, outside "
                f"the exact sampler's range [{MIN_SIGMA:.4g}, {MAX_SIGMA:.4g}]"
            )
    return measurements, chosen_quantiles


_EXPONENT_STEP = 16  # the scan for a working ρ: every 16th power of two, then bisection


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
    high = edge(scanned[-1], min(scanned[-1] + _EXPONENT_STEP, 1024))
    return low, high


def _two_digits(x: float, *, up: bool) -> str:
    """``x`` to two significant digits, rounded up or down (so the advice it gives holds)."""
    d = Decimal(x)
    exponent = d.adjusted() - 1
    digits = d.scaleb(-exponent).to_integral_value(ROUND_CEILING if up else ROUND_FLOOR)
    return f"{float(digits.scaleb(exponent)):.2g}"  # the two digits, exactly


def _out_of_range(
    rho: Fraction, reason: str, measure: Callable[[Fraction], _Measured]
) -> Exception:
    """The error for a ρ at which some measurement cannot be drawn: the real cause, and the fix."""

    def works(candidate: Fraction) -> bool:
        try:
            measure(candidate)
        except _NoiseRangeError:
            return False
        return True

    found = _working_exponents(works)
    if found is None:
        return InvalidValueError(
            f"{reason}, and no rho makes this query work: its bounds or contribution limits "
            "are too extreme; rescale the columns and their bounds (e.g. to thousands or "
            "millionths), or lower the contribution limits"
        )
    low, high = (math.ldexp(1.0, e) for e in found)
    if low <= rho <= high:  # not expected: the failure is not a matter of rho
        return InvalidValueError(
            f"{reason}; rescale the columns and their bounds, or change the contribution limits"
        )
    size = "small" if rho < low else "large"
    return InvalidBudgetError(
        f"rho={float(rho):.3g} is too {size} for exact noise at these bounds and contribution "
        f"limits: {reason}. This query can be released with rho from {_two_digits(low, up=True)} "
        f"to {_two_digits(high, up=False)}; use a rho in that range"
        + (", or lower the contribution limits" if size == "small" else "")
    )


def plan_release(
    plan: Plan,
    has_unit: bool,
    rho: Number,
    weights: Mapping[str, float] | Balance | None = None,
    delta: Number | None = None,
) -> ReleasePlan:
    """Derive limits, measurements, the ρ split and σ for releasing ``plan`` at ``rho``.

    ``rho`` and ``delta`` are budgets, read exactly
    (:func:`privframe.accounting.exact`: ``0.1`` is 1/10). Each measurement's
    share is exactly ρ·weight/(sum of weights), its σ is calibrated to that
    exact share (rounded up, so Δ²/(2σ²) <= share), and the plan's cost is the
    exact sum of the shares charged: exactly ρ, or less when a quantile's
    recomputed cost is below its share.

    ``weights`` maps output names to relative weights (default: equal), or is
    a :class:`~privframe.plan.split.Balance` to balance relative error. A plan that
    groups without public keys also gets a :class:`Selection`, which needs
    ``delta`` and takes the average output's share of ρ as one more output.

    Raises:
        InvalidBudgetError: ``rho`` is not a positive number, or is outside
            the range in which every measurement's noise can be drawn
            exactly (the message gives that range).
    """
    rho = exact("rho", rho, positive=True)
    if not plan.aggregates:
        raise InvalidValueError("the query has no aggregates: add .agg(pf.count(), ...)")
    selecting = _selects(plan)
    if selecting and not delta:
        raise InvalidBudgetError(
            "choosing groups privately needs a delta > 0 (give the session a budget such as "
            "pf.zCDP(rho=1.0, delta=1e-7), or pass public keys: group_by(..., keys=[...]))"
        )
    limits = resolve_limits(plan, has_unit)
    outputs = tuple(Output(a.output_name, a, _measurements_of(a)) for a in plan.aggregates)
    if isinstance(weights, Balance):
        shares, errors = _balanced(outputs, limits, weights)
    else:
        shares, errors = _weights(outputs, weights), {}
    if selecting:
        # One more output's worth: the average share of the others.
        shares[_SELECTION] = sum(shares.values(), Fraction(0)) / len(outputs)
    values: dict[str, tuple[ValueKind, _Bounded]] = {}
    asked: dict[str, Quantile] = {}
    for out in outputs:
        agg = out.aggregate
        if isinstance(agg, Quantile):
            asked[out.measurements[0]] = agg
        elif isinstance(agg, Sum):
            values[out.measurements[0]] = ("sum", agg)
        elif isinstance(agg, Mean):
            values[out.measurements[0]] = ("centred_sum", agg)
        elif isinstance(agg, Var):
            values[out.measurements[0]] = ("centred_sum_sq", agg)
            values[out.measurements[1]] = ("centred_sum", agg)

    def measure(candidate: Fraction) -> _Measured:
        return _measure(candidate, shares, limits, asked, values)

    failure = None
    try:
        measurements, chosen_quantiles = measure(rho)
    except _NoiseRangeError as err:
        failure = str(err)
    if failure is not None:
        raise _out_of_range(rho, failure, measure)
    rho_spent = sum((m.exact_rho for m in (*measurements, *chosen_quantiles)), Fraction(0))
    found = tuple(chosen_quantiles)
    relative = tuple(
        (name, math.sqrt(sum(b / _rho_of(key, measurements, found) for key, b in row.items())))
        for name, row in errors.items()
    )
    if not selecting:
        return ReleasePlan(
            limits, tuple(measurements), outputs, zCDP(rho_spent), None, found, relative
        )
    selection_delta = exact("delta", delta, positive=True)
    cost = zCDP(rho_spent, selection_delta)  # refuses a delta >= 1
    chosen = next(m for m in measurements if m.key == _SELECTION)
    threshold_delta = round_down(selection_delta)
    selection = Selection(
        chosen,
        discrete_threshold(chosen.sigma_units, limits.max_groups, threshold_delta),
        threshold_delta,
    )
    kept = tuple(m for m in measurements if m.key != _SELECTION)
    return ReleasePlan(limits, kept, outputs, cost, selection, found, relative)


def explain(
    plan: Plan,
    has_unit: bool,
    rho: float,
    weights: Mapping[str, float] | None,
    delta: float | None = None,
    report_delta: float | None = None,
) -> Explanation:
    """The explanation of a release: every number comes from public parameters.

    With ``report_delta`` (the session's reporting δ), a release that chooses
    its keys also states its own (ε, δ) by both analyses.
    """
    release = plan_release(plan, has_unit, rho, weights, delta)
    rows = []
    for out in release.outputs:
        agg = out.aggregate
        if isinstance(agg, Quantile):
            bound = release.quantile(out.measurements[0]).rank_error()
            rows.append(
                {
                    "output": out.name,
                    "measurements": out.measurements[0],
                    "std": "n/a (exponential mechanism; error in ranks, not values)",
                    "ci95": f"{bound:.4g} rows of rank beyond the nearest candidate "
                    f"(spacing {agg.spacing:.6g})",
                }
            )
            continue
        first = release.measurement(out.measurements[0])
        if isinstance(agg, Var):
            # First order: the squares' noise over the count (of the variance).
            std = f"≈ {first.sigma:.6g} / count (of the variance)"
            ci = f"≈ {Z95 * first.sigma:.6g} / count (of the variance)"
        elif isinstance(agg, Mean):
            # Delta method (an approximation) at the largest |mean − midpoint|,
            # (U − L)/2; the release's own <name>_std uses the released mean.
            count = release.measurement(out.measurements[1])
            half = (agg.upper - agg.lower) / 2
            bound = math.hypot(first.sigma, half * count.sigma)
            std = f"≈ {bound:.6g} / count"
            ci = f"≈ {Z95 * bound:.6g} / count"
        else:
            std, ci = f"{first.sigma:.6g}", f"{first.ci95:.6g}"
        rows.append(
            {
                "output": out.name,
                "measurements": ", ".join(out.measurements),
                "std": std,
                "ci95": ci,
            }
        )
    return Explanation(release, tuple(rows), report_delta)
