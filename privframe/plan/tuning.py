"""Choosing contribution limits and value bounds from private histograms: the math of ``tune``.

``query.tune(rho, plan_rho=...)`` (:mod:`privframe.api.tune`) spends ``rho`` on a
few noisy histograms of how privacy units contribute, then picks the
``max_groups`` (k), ``max_rows_per_group`` (m) and value bounds (L, U) that
minimise the estimated error of the query's outputs when released at
``plan_rho``. This module holds everything that needs no data: the design of
the histograms (bins, ρ split, σ, cost: :func:`design`), reading the noisy
histograms (:func:`read`), the error model and the search (:func:`choose`).
The exact histograms come from the engine (:mod:`privframe.engines.contributions`).

**The histograms and their sensitivity.** Neighbouring datasets differ in all
rows of one unit (docs/privacy.md), so each histogram's L2 sensitivity is the
largest L2 norm of one unit's contribution vector ``v_u``:

* *groups per unit*: unit u adds 1 to the bin of its number of groups g_u:
  ``v_u`` is one 1, so Δ₂ = 1;
* *rows per (unit, group)*: unit u adds ``floor(W·c_ub/g_u)`` to bin b, where
  c_ub of its g_u cells have a row count in bin b: ``v_u >= 0`` and
  ``Σ_b v_ub <= W·Σ_b c_ub/g_u = W``, so ``||v_u||₂ <= ||v_u||₁ <= W``: Δ₂ = W;
* *values of a column*: unit u adds ``floor(W·c_ub/N_u)`` to signed bucket b,
  where c_ub of its N_u non-missing values fall in b: the same argument gives Δ₂ = W.

Each unit's vector depends on its own rows only (the row steps are row-wise,
and dropping rows of non-public keys does not depend on other units), so
adding or removing a unit changes each histogram by exactly that unit's
vector. Each histogram gets the discrete Gaussian with ``σ = Δ₂/sqrt(2ρ_i)``,
which is ρ_i-zCDP (Canonne, Kamath & Steinke 2020; Bun & Steinke 2016,
Prop. 1.6); the pieces split ``rho`` evenly, ``ρ_i = rho/n`` exactly, so the
whole is ``rho``-zCDP by composition (Bun & Steinke 2016, Lemma 2.3). All
that follows is post-processing.

**The estimates** (docs/tuning.md). Noisy bins below ``τ = z·σ`` (z such that
some empty bin passes with probability at most 1e-6 over the histogram) are set
to 0. That hides a heavy tail: a few units spread over sparse high buckets,
each below τ. So the ``TAIL_BINS`` value buckets beyond each end of the support
are also kept raw (``Histogram.tail``): the noise has mean 0, so their sum
is nearly unbiased (a bucket holding close to τ reads low, having fallen
below it), and its uncertainty is known (σ per bucket). The rows and values
histograms are *unit-weighted*: each unit's cells (values) weigh 1 in total.
With U units, the model assumes a unit's number of groups independent of its
cells' sizes, rows spread evenly over the G public groups, and values
independent of the bounding: per group, rows kept
``≈ U·E[min(g, k)]·E[min(n, m)]/G`` out of ``U·E[g]·E[n]/G``; each output's
bounded expectation comes from its own estimator fed those expectations, its
noise σ from the planner at ``plan_rho`` (:func:`~privframe.plan.planner.plan_release`,
what ``explain`` shows), and its bias from the difference with the unbounded
value, read from the raw tail up to the given bounds. The objective is the sum
over outputs of ``(bias² + u² + σ²)/size²``, a relative error so that counts and
sums weigh alike, where u is the std of the bias estimate from the raw
buckets' noise. It is an estimate.

Example:
    >>> import privframe as pf
    >>> from fractions import Fraction
    >>> from privframe.plan.ir import Plan
    >>> plan = Plan(aggregates=(pf.count(), pf.sum("x", (0, 10))))
    >>> d = design(plan, has_unit=True, rho=Fraction(1, 10))
    >>> [(p.name, float(p.rho)) for p in d.pieces]
    [('rows per (unit, group)', 0.05), ('values of x', 0.05)]
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
import scipy

from privframe.accounting.budgets import zCDP
from privframe.accounting.calibration import gaussian_sigma
from privframe.accounting.events import GaussianEvent
from privframe.engines.contributions import Contributions, ContributionSpec, signed_buckets
from privframe.engines.spec import AggregationSpec
from privframe.errors import InvalidBudgetError, InvalidValueError
from privframe.mechanisms.noise import MAX_SIGMA, MIN_SIGMA
from privframe.plan.aggregates import Bounded
from privframe.plan.ir import Plan
from privframe.plan.planner import selects

__all__ = [
    "MAGNITUDE_EDGES",
    "SCALE",
    "Estimates",
    "Histogram",
    "Piece",
    "TuningDesign",
    "Wanted",
    "design",
    "group_edges",
    "integer_edges",
    "measuring",
    "read",
    "tuned_columns",
    "values_of",
]

SCALE = 1 << 16
"""W: a unit's weights in a rows or values histogram add up to at most W (grid 1/W)."""

_ROW_LIMIT = 1 << 31
_FALSE_BIN = 1e-6  # chance that some empty bin of a histogram survives the threshold
TAIL_BINS = 8
"""How many sub-threshold value buckets beyond each end of the support are read raw: a factor 16."""

MAGNITUDE_EDGES: tuple[float, ...] = tuple(2.0 ** (i / 2) for i in range(-40, 129))
"""Half-octave magnitudes 2^-20 ... 2^64: the edges of the signed value buckets."""


def integer_edges(limit: int) -> tuple[int, ...]:
    """Half-octave lower edges of integer bins, 1, 2, 3, 4, 6, 8, 11, 16, ..., up to ``limit``.

    Example:
        >>> integer_edges(20)
        (1, 2, 3, 4, 6, 8, 11, 16)
    """
    edges, i = set(), 0
    while round(2 ** (i / 2)) <= limit:
        edges.add(round(2 ** (i / 2)))
        i += 1
    return tuple(sorted(edges))


def group_edges(n_groups: int) -> tuple[int, ...]:
    """Lower edges of the groups-per-unit bins: 1 to 16 one by one, then half-octaves.

    The last edge is ``n_groups`` itself, so the last bin holds exactly the
    units in every group (a unit is in at most ``n_groups`` public groups) and
    ``max_groups = n_groups`` can be told from the edge below it.

    Example:
        >>> group_edges(5), group_edges(40)
        ((1, 2, 3, 4, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 23, 32, 40))
    """
    return tuple(sorted({*range(1, min(n_groups, 16) + 1), *integer_edges(n_groups), n_groups}))


@dataclass(frozen=True)
class Piece:
    """One noisy histogram: its bins (lower edges), sensitivity, ρ share and σ, all public."""

    name: str
    kind: Literal["groups", "rows", "values"]
    column: str | None
    edges: tuple[float, ...]
    l2_units: int
    rho: Fraction
    sigma_units: float

    @property
    def bins(self) -> int:
        """How many noisy values it has."""
        return signed_buckets(self.edges) if self.kind == "values" else len(self.edges)

    @property
    def threshold(self) -> float:
        """τ: noisy bins below it are read as empty (weight units of the array)."""
        return self.sigma_units * float(scipy.special.ndtri(1 - _FALSE_BIN / self.bins))

    def counts(self, tables: Contributions) -> np.ndarray:
        """Its exact histogram among the engine's (never shown before noise)."""
        if self.kind == "groups":
            return tables.groups
        if self.kind == "rows":
            return tables.rows
        assert self.column is not None
        return tables.values[self.column]


@dataclass(frozen=True)
class TuningDesign:
    """The histograms ``tune`` measures, their ρ split and σ, and the cost: no data."""

    pieces: tuple[Piece, ...]
    cost: zCDP
    n_groups: int
    has_unit: bool

    def piece(self, kind: str, column: str | None = None) -> Piece | None:
        """The piece of this kind (and column), or None."""
        return next((p for p in self.pieces if p.kind == kind and p.column == column), None)

    def describe(self) -> dict[str, object]:
        """Public parameters and mechanism events for the ledger entry."""
        events = [
            GaussianEvent(p.sigma_units / p.l2_units, discrete=True, dimension=p.bins).to_dict()
            for p in self.pieces
        ]
        pieces = [
            {"histogram": p.name, "bins": p.bins, "rho": float(p.rho), "sigma": p.sigma_units}
            for p in self.pieces
        ]
        return {"tune": {"scale": SCALE, "histograms": pieces}, "events": events}

    def contribution_spec(self, rows: AggregationSpec) -> ContributionSpec:
        """What the engine summarises for these histograms over ``rows`` (a release's spec).

        Example:
            >>> import privframe as pf
            >>> from privframe.engines.spec import AggregationSpec
            >>> d = design(Plan(aggregates=(pf.sum("x", (0, 1)),)), True, Fraction(1))
            >>> rows = AggregationSpec((), "u", (), None, None, 1, None, (), seed=0)
            >>> spec = d.contribution_spec(rows)
            >>> spec.group_edges, spec.value_columns
            ((), ('x',))
        """
        edges = {p.kind: p.edges for p in self.pieces if p.kind != "values"}
        return ContributionSpec(
            rows,
            SCALE,
            edges.get("groups", ()),
            edges.get("rows", ()),
            tuple(p.column for p in self.pieces if p.column is not None),
            MAGNITUDE_EDGES,
        )


def tuned_columns(plan: Plan) -> tuple[str, ...]:
    """The columns whose values ``tune`` measures: those of the bounded aggregates."""
    return tuple(dict.fromkeys(a.column for a in plan.aggregates if isinstance(a, Bounded)))


Wanted = tuple[str, Literal["groups", "rows", "values"], str | None, tuple[float, ...], int]
"""A histogram to measure: its name, kind, column, bin edges and L2 sensitivity (units)."""


def values_of(column: str) -> Wanted:
    """The values histogram of ``column``: signed half-octave buckets, L2 sensitivity W."""
    return (f"values of {column}", "values", column, MAGNITUDE_EDGES, SCALE)


def measuring(
    wanted: Sequence[Wanted], rho: Fraction, n_groups: int, has_unit: bool, what: str, fix: str
) -> TuningDesign:
    """The design that measures ``wanted`` at ``rho/n`` each, ``rho`` in all; no data.

    ``what`` and ``fix`` name the purpose and the remedy in the refusal.

    Raises:
        InvalidBudgetError: ``rho`` is so small that some noise cannot be drawn.

    Example:
        >>> d = measuring([values_of("x")], Fraction(1, 10), 1, True, "tune", "more rho")
        >>> [(p.name, p.l2_units, float(p.rho)) for p in d.pieces]
        [('values of x', 65536, 0.1)]
    """
    share = rho / len(wanted)
    pieces = []
    for name, kind, measured, edges, l2 in wanted:
        sigma = max(gaussian_sigma(l2, share), MIN_SIGMA)
        if sigma > MAX_SIGMA:
            raise InvalidBudgetError(
                f"rho={float(rho):.3g} is too small to {what}: the noise of {name} would exceed "
                f"the exact sampler's range; {fix}"
            )
        pieces.append(Piece(name, kind, measured, edges, l2, share, sigma))
    return TuningDesign(tuple(pieces), zCDP(rho), n_groups, has_unit)


def design(plan: Plan, has_unit: bool, rho: Fraction) -> TuningDesign:
    """The histograms to measure for ``plan``, each at ``rho/n``; refuses what cannot be tuned.

    Raises:
        InvalidValueError: the plan has no aggregates, chooses its groups
            privately, or has nothing to tune (no privacy unit and no bounds).
        InvalidBudgetError: ``rho`` is so small that the noise cannot be drawn.

    Example:
        >>> import privframe as pf
        >>> from fractions import Fraction
        >>> from privframe.plan.ir import Plan
        >>> d = design(Plan(aggregates=(pf.count(),)), has_unit=True, rho=Fraction(1, 10))
        >>> [(p.name, p.l2_units) for p in d.pieces], d.cost
        ([('rows per (unit, group)', 65536)], zCDP(rho=0.1, delta=0.0))
    """
    if not plan.aggregates:
        raise InvalidValueError("the query has no aggregates to tune: add .agg(pf.count(), ...)")
    if selects(plan):
        raise InvalidValueError(
            "tune needs public group keys (group_by(..., keys=[...])) or no group_by: with "
            "groups chosen privately the number of groups is not public"
        )
    n_groups = plan.n_groups or 1
    wanted: list[Wanted] = []
    if has_unit and n_groups > 1:
        wanted.append(("groups per unit", "groups", None, group_edges(n_groups), 1))
    if has_unit:
        wanted.append(("rows per (unit, group)", "rows", None, integer_edges(_ROW_LIMIT), SCALE))
    wanted += [values_of(column) for column in tuned_columns(plan)]
    if not wanted:
        raise InvalidValueError(
            "nothing to tune: without a privacy unit there are no contribution limits, and the "
            "query has no bounded aggregate (sum, mean, var, std, quantile)"
        )
    return measuring(wanted, rho, n_groups, has_unit, "tune", "give tune a larger rho")


@dataclass(frozen=True, eq=False)
class Histogram:
    """A noisy histogram read for the model: bins ``[low, high)``, a value for each, weights."""

    low: np.ndarray
    high: np.ndarray
    mid: np.ndarray
    weight: np.ndarray  # >= 0, in units (rows and values: in units of whole privacy units)
    tail: np.ndarray | None = (
        None  # raw noisy weights of the bins just beyond the support, else NaN
    )
    sigma: float = 0.0  # the noise's σ in each bin, in units

    def with_tail(self) -> Histogram:
        """The histogram with its tail's raw noisy weights added: nearly unbiased, maybe < 0.

        Example:
            >>> raw = np.zeros(signed_buckets(MAGNITUDE_EDGES))
            >>> raw[250], raw[253], raw[300] = 100.0, 3.0, 4.0  # 3 units beyond, 4 of noise far out
            >>> h = _value_histogram(MAGNITUDE_EDGES, *_split_tail(raw, threshold=10.0), sigma=1.0)
            >>> h.total, h.with_tail().total, h.support(), h.with_tail().support()
            (100.0, 103.0, (250, 250), (250, 253))
        """
        if self.tail is None:
            return self
        return dataclasses.replace(self, weight=self.weight + np.nan_to_num(self.tail), tail=None)

    @property
    def total(self) -> float:
        """The total weight (units)."""
        return float(self.weight.sum())

    def expect(self, values: np.ndarray) -> float:
        """The weighted mean of ``values`` (one per bin); 0 for an empty histogram."""
        total = self.total
        return float(self.weight @ values) / total if total > 0 else 0.0

    def mean_of_min(self, cap: int) -> float:
        """E[min(x, cap)] for an integer histogram, x uniform over the integers of its bin.

        The open last bin counts as its low edge.

        Example:
            >>> h = _integer_histogram((1, 2, 3, 4, 6), np.array([0, 0, 0, 1.0, 0]))
            >>> h.mean_of_min(5), h.mean_of_min(4), h.mean_of_min(9)
            (4.5, 4.0, 4.5)
        """
        a = self.low
        last = np.append(self.low[1:] - 1, self.low[-1])
        count = last - a + 1
        m = float(cap)
        inside = (m - a + 1) * (a + m) / 2 + (last - m) * m
        sums = np.where(m >= last, count * (a + last) / 2, np.where(m < a, count * m, inside))
        return self.expect(sums / count)

    def quantile(self, q: float) -> int:
        """The index of the bin where the weighted CDF first reaches ``q``."""
        cdf = np.cumsum(self.weight) / max(self.total, 1e-300)
        return min(int(np.searchsorted(cdf, q - 1e-12)), len(cdf) - 1)

    def support(self) -> tuple[int, int] | None:
        """The first and last bins with weight, or None when it is empty."""
        nonzero = np.flatnonzero(self.weight)
        return (int(nonzero[0]), int(nonzero[-1])) if nonzero.size else None


def _integer_histogram(edges: Sequence[float], weight: np.ndarray) -> Histogram:
    low = np.asarray(edges, dtype=np.float64)
    high = np.append(low[1:], low[-1] * math.sqrt(2))
    # The mean of the integers in [low, high): (low + high − 1)/2; the open last bin at its low.
    mid = np.append((low[:-1] + high[:-1] - 1) / 2, low[-1])
    return Histogram(low, high, mid, weight)


def _split_tail(raw: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Weights at or above ``threshold``, and the raw weights just beyond their support.

    The tail holds the ``TAIL_BINS`` bins beyond each end of the support, NaN
    elsewhere (the rest of the raw noise is dropped).
    """
    weight = np.where(raw >= threshold, raw, 0.0)
    tail = np.full_like(raw, np.nan)
    support = np.flatnonzero(weight)
    if support.size:
        below = slice(max(int(support[0]) - TAIL_BINS, 0), int(support[0]))
        above = slice(int(support[-1]) + 1, int(support[-1]) + 1 + TAIL_BINS)
        tail[below], tail[above] = raw[below], raw[above]
    return weight, tail


def _value_histogram(
    edges: Sequence[float], weight: np.ndarray, tail: np.ndarray | None = None, sigma: float = 0.0
) -> Histogram:
    e = np.asarray(edges, dtype=np.float64)
    top = np.append(e[1:], e[-1] * math.sqrt(2))  # magnitudes beyond the last edge count as it
    positive_mid = np.append((e[:-1] + e[1:]) / 2, e[-1])
    low = np.concatenate([-top[::-1], [-e[0]], e])
    high = np.concatenate([-e[::-1], [e[0]], top])
    mid = np.concatenate([-positive_mid[::-1], [0.0], positive_mid])
    return Histogram(low, high, mid, weight, tail, sigma)


@dataclass(frozen=True, eq=False)
class Estimates:
    """The noisy histograms, thresholded and read in units: what the search works from."""

    design: TuningDesign
    groups: Histogram | None
    rows: Histogram | None
    values: dict[str, Histogram]

    @property
    def units(self) -> float:
        """The estimated number of privacy units (rows, without a privacy unit)."""
        for h in (self.groups, self.rows, *self.values.values()):
            if h is not None:
                return h.total
        return 0.0


def read(design: TuningDesign, noisy: Mapping[str, np.ndarray]) -> Estimates:
    """The noisy histograms (by piece name, in array units) as :class:`Estimates`.

    Post-processing only: bins below each piece's threshold become 0, and
    weights are divided by the piece's scale. A values histogram also keeps,
    as its ``tail``, the raw noisy weights of the ``TAIL_BINS`` buckets beyond
    each end of its support (where sparse tail mass hides below the threshold).

    Example:
        >>> import numpy as np
        >>> import privframe as pf
        >>> from fractions import Fraction
        >>> from privframe.plan.ir import Plan
        >>> d = design(Plan(aggregates=(pf.count(),)), has_unit=True, rho=Fraction(10**6))
        >>> rows = np.zeros(d.pieces[0].bins)
        >>> rows[2] = 30 * SCALE  # 30 units with 3 rows in their group
        >>> e = read(d, {"rows per (unit, group)": rows})
        >>> e.units, e.rows.mean_of_min(2)
        (30.0, 2.0)
    """

    def scaled(p: Piece) -> tuple[np.ndarray, float]:
        """The raw noisy bins and the threshold in units."""
        scale = p.l2_units if p.kind != "groups" else 1
        return np.asarray(noisy[p.name], dtype=np.float64) / scale, p.threshold / scale

    def clean(p: Piece) -> np.ndarray:
        return _split_tail(*scaled(p))[0]

    def values(p: Piece) -> Histogram:
        sigma = p.sigma_units / p.l2_units
        return _value_histogram(p.edges, *_split_tail(*scaled(p)), sigma=sigma)

    groups = design.piece("groups")
    rows = design.piece("rows")
    return Estimates(
        design,
        None if groups is None else _integer_histogram(groups.edges, clean(groups)),
        None if rows is None else _integer_histogram(rows.edges, clean(rows)),
        {p.column: values(p) for p in design.pieces if p.kind == "values" and p.column is not None},
    )
