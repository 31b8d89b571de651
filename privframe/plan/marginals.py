"""Measuring marginals: public domains, the exact bounded table, secure noise and selection.

What ``Session.marginals`` and ``Session.synthesize`` measure, and how:

1. **Domains** (:func:`resolve_domains`) come from public facts only: a
   ``domains=`` list or :func:`privframe.bin` per column, the Session's
   ``pf.Column(keys=...)`` metadata, or a type whose values are public
   (Boolean). A column without one is refused: values
   read from the data could name one person (a value only they have).
   Rows whose value in some column is null or outside its domain are dropped
   (a row-wise filter, before bounding).
2. **Bounding**: each privacy unit keeps at most ``max_rows`` rows (chosen at
   random by the engine), so removing a person changes every count table by
   at most ``M = max_rows`` in L1 and in L2 norm (Δ₁ = Δ₂ = M: their rows
   add M to cells of one marginal, and ‖v‖₂ ≤ ‖v‖₁ for counts).
3. **Exact table** (:func:`exact_table`): the engine's bounded count of every
   observed combination of the columns, never shown. Every marginal is a sum
   of it, computed here.
4. **Measurements** (:class:`Measurer`), after the whole cost is charged: a
   marginal gets discrete Gaussian noise of σ = M/√(2ρ) (ρ-zCDP, Canonne,
   Kamath & Steinke 2020, Thm. 14) or, in a pure-DP session, discrete Laplace
   noise of scale b = M/ε (ε-DP, same paper, Sec. 2.2); a choice among
   candidates is the exponential mechanism (McSherry & Talwar 2007), sampled
   exactly (:func:`~privframe.mechanisms.exponential.exponential_choice`),
   ε-DP and ε²/8-zCDP (Cesar & Rogers 2021, Lemma 3.2, bounded range).

Example:
    >>> import polars as pl
    >>> from privframe.plan.marginals import resolve_domains
    >>> domains = resolve_domains(("sex",), {"sex": ["f", "m"]}, {}, pl.Schema({"sex": pl.String}))
    >>> domains.sizes
    {'sex': 2}
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from privframe.accounting._kinds import Spendable
from privframe.accounting.budgets import PureDP, zCDP
from privframe.accounting.calibration import gaussian_sigma
from privframe.accounting.events import GaussianEvent, LaplaceEvent
from privframe.engines.expressions import Bin
from privframe.engines.spec import COUNT, AggregationSpec, RowStep, Step
from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.mechanisms.exponential import exponential_choice
from privframe.mechanisms.laplace import (
    discrete_laplace,
    discrete_laplace_halfwidth,
    discrete_laplace_std,
    laplace_scale,
)
from privframe.mechanisms.noise import Randomness, SystemRandomness
from privframe.mechanisms.sampler import (
    MIN_LAPLACE_SCALE,
    MIN_SIGMA,
    check_laplace_scale,
    check_sigma,
    discrete_gaussian,
    discrete_gaussian_halfwidth,
)
from privframe.numeric import round_down, sqrt_down
from privframe.plan.keys import exact_keys, from_list
from privframe.synth.model import Domain, Measured

__all__ = [
    "Domains",
    "Exact",
    "Measurer",
    "Noise",
    "epsilon_for",
    "exact_table",
    "resolve_domains",
    "sigma_for",
]

_GRID = 2**20
"""Model estimates enter a selection's scores on this grid, so that the scores are exact."""


@dataclass(frozen=True)
class Domains:
    """The public values of each measured column, in order (a value's code is its position).

    Attributes:
        values: per column, its public values, typed as the column is after
            binning (a binned column holds its bin labels).
        steps: the row steps that bin columns and drop rows outside the domains.
    """

    values: Mapping[str, pl.Series]
    steps: tuple[Step, ...]

    @property
    def sizes(self) -> Domain:
        """Each column's number of values, in order."""
        return {column: len(v) for column, v in self.values.items()}

    def frame(self, columns: Sequence[str], codes: npt.NDArray[np.int64]) -> pl.DataFrame:
        """Rows of codes (one column per name in ``columns``) as a frame of the public values.

        Example:
            >>> import numpy as np
            >>> import polars as pl
            >>> d = Domains({"x": pl.Series("x", ["a", "b"])}, ())
            >>> d.frame(["x"], np.array([[1], [0]]))["x"].to_list()
            ['b', 'a']
        """
        return pl.DataFrame([self.values[c].gather(codes[:, j]) for j, c in enumerate(columns)])


def resolve_domains(
    columns: Sequence[str],
    given: Mapping[str, Any] | None,
    listed: Mapping[str, Sequence[Any] | None],
    schema: pl.Schema,
    unit: str | None = None,
) -> Domains:
    """The public domain of each of ``columns``, from ``given``, else ``listed``, else the type.

    ``listed`` holds the Session's public keys per column (``pf.Column(keys=...)``).

    Raises:
        InvalidValueError: an unknown column, the privacy unit, a column with
            no public domain, or a domain that names no column of the data.
        InvalidArgumentError: a domain of the wrong kind, or whose values are
            not exact values of the column's type.
    """
    given = dict(given or {})
    # Domains of other columns of the data are welcome (one dict for many calls); a name
    # that is no column at all is a typo.
    stray = sorted(set(given) - set(schema.names()))
    if stray:
        raise InvalidValueError(
            f"domains= names {stray}, which are not columns of the data {schema.names()}"
        )
    unknown = [c for c in columns if c not in schema]
    if unknown:
        raise InvalidValueError(f"columns {unknown} are not in the data; it has {schema.names()}")
    if unit in columns:
        raise InvalidValueError(
            f"column {unit!r} is the privacy unit: its values identify people, so it is never "
            "measured or synthesized"
        )
    values: dict[str, pl.Series] = {}
    steps: list[Step] = []
    for column in columns:
        domain = given.get(column)
        if domain is None:
            domain = listed.get(column)
        if isinstance(domain, Bin):
            if domain.column != column:
                raise InvalidValueError(
                    f"domains[{column!r}] bins column {domain.column!r}; bin {column!r} itself"
                )
            if not schema[column].is_numeric():
                raise InvalidArgumentError(
                    f"column {column!r} has type {schema[column]}; pf.bin bins numeric columns"
                )
            steps.append(RowStep("with_columns", (domain.expr,)))
            values[column] = pl.Series(column, domain.keys, dtype=pl.String)
            continue
        values[column] = _listed(column, domain, schema[column])
    # A literal list: what the allow-list (and so every engine) takes for is_in.
    kept = tuple(pl.col(c).is_in(v.to_list()) for c, v in values.items())
    if kept:
        steps.append(RowStep("filter", kept))
    return Domains(values, tuple(steps))


def _listed(column: str, domain: Any, dtype: pl.DataType) -> pl.Series:
    """A column's listed (or type-given) values, cast exactly to its type."""
    if domain is None:
        if dtype == pl.Boolean:
            return pl.Series(column, [False, True], dtype=pl.Boolean)
        how = (
            f"give it public bins, e.g. domains={{{column!r}: pf.bin({column!r}, [0, 10, 100])}}"
            if dtype.is_numeric()
            else f"list its values: domains={{{column!r}: [...]}} or "
            f"Session(metadata={{{column!r}: pf.Column(keys=[...])}})"
        )
        raise InvalidValueError(
            f"column {column!r} has no public domain: {how}. privframe never reads a domain "
            "from the data, where a value only one person has would reveal them"
        )
    if isinstance(domain, str | bytes) or not isinstance(domain, Sequence):
        raise InvalidArgumentError(
            f"the domain of {column!r} must be a list of its values or a pf.bin, "
            f"got {type(domain).__name__}"
        )
    keys = from_list(column, domain).to_polars()
    try:
        return exact_keys(keys, pl.Schema({column: dtype}))[column]
    except InvalidArgumentError as err:
        refusal = InvalidArgumentError(str(err).replace("group_by column", "column"))
    raise refusal


def exact_table(
    aggregate: Any,
    domains: Domains,
    unit: str | None,
    max_rows: int,
    rng: Randomness | None,
) -> Exact:
    """The engine's bounded counts of every observed combination of the domain columns.

    ``aggregate`` runs an :class:`~privframe.engines.spec.AggregationSpec`
    (``Pipeline.aggregate``: a failure is refused without its message). Each
    unit keeps at most ``max_rows`` rows.
    """
    columns = tuple(domains.values)
    spec = AggregationSpec(
        steps=domains.steps,
        unit=unit,
        group_by=columns,
        keys=None,
        max_groups=None,
        max_rows_per_group=max_rows,
        max_rows=max_rows if unit is not None else None,
        values=(),
        seed=int((rng or SystemRandomness()).words(1)[0]),
    )
    table = aggregate(spec)
    codes = []
    for column, values in domains.values.items():
        index = pl.DataFrame({column: values, "__code": np.arange(len(values), dtype=np.int64)})
        codes.append(table.select(column).join(index, on=column, how="left", maintain_order="left"))
    matrix = np.column_stack([c["__code"].to_numpy() for c in codes]) if codes else None
    counts = table[COUNT].to_numpy().astype(np.int64)
    # No row inside the domains is a table of zeros, never a refusal: a refusal that came only
    # when nobody has a value would answer "does anyone?" for free.
    shape = (len(counts), len(domains.values))
    return Exact(domains.sizes, np.asarray(matrix, dtype=np.int64).reshape(shape), counts)


@dataclass(frozen=True, eq=False)
class Exact:
    """The exact bounded table, as codes and counts: private, never shown.

    Attributes:
        domain: each column's number of values.
        codes: one row per observed combination, one code per column.
        counts: each combination's bounded number of rows.
    """

    domain: Domain
    codes: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]

    def marginal(self, columns: Sequence[str]) -> npt.NDArray[np.int64]:
        """The exact count table over ``columns`` (one axis per column, in order).

        Example:
            >>> import numpy as np
            >>> e = Exact({"a": 2, "b": 2}, np.array([[0, 1], [1, 1]]), np.array([3, 4]))
            >>> e.marginal(["b"]).tolist()
            [0, 7]
        """
        names = list(self.domain)
        shape = tuple(self.domain[c] for c in columns)
        if not columns:
            return np.array(int(self.counts.sum()), dtype=np.int64)
        index = np.ravel_multi_index(tuple(self.codes[:, names.index(c)] for c in columns), shape)
        flat = np.bincount(index, weights=self.counts, minlength=math.prod(shape))
        return np.rint(flat).astype(np.int64).reshape(shape)


def sigma_for(rho: Fraction, sensitivity: int) -> float:
    """The smallest float σ ≥ MIN_SIGMA whose discrete Gaussian costs at most ``rho``: Δ²/(2σ²) ≤ ρ.

    Example:
        >>> from fractions import Fraction
        >>> sigma_for(Fraction(1, 2), 1)
        1.0
    """
    return max(gaussian_sigma(float(sensitivity), rho), MIN_SIGMA)


def epsilon_for(rho: Fraction) -> float:
    """The largest float ε whose exponential mechanism costs at most ``rho``: ε²/8 ≤ ρ.

    Example:
        >>> from fractions import Fraction
        >>> epsilon_for(Fraction(1, 8))
        1.0
    """
    return sqrt_down(8 * rho)


class Noise:
    """How a cost buys noise for count tables one person moves by at most ``sensitivity`` rows.

    ``family`` is ``"gaussian"`` (costs are ρ: discrete Gaussian noise, the
    exponential mechanism at ε²/8 ≤ ρ) or ``"laplace"`` (costs are ε:
    discrete Laplace noise, the exponential mechanism at ε). Public
    parameters only: planning and ``explain`` use it before any data is read.

    Example:
        >>> from fractions import Fraction
        >>> Noise(2, "gaussian").std(Fraction(2)), Noise(2, "gaussian").budget(Fraction(2))
        (1.0, zCDP(rho=2.0, delta=0.0))
    """

    def __init__(self, sensitivity: int, family: str) -> None:
        self.sensitivity = sensitivity
        self.family = family
        # σ ∝ 1/√ρ and b ∝ 1/ε: the factor on a cost that halves the noise.
        self.sharpen = 4 if family == "gaussian" else 2

    def budget(self, amount: Fraction) -> Spendable:
        """``amount`` as the budget it is: zCDP(ρ), or PureDP(ε)."""
        return zCDP(amount) if self.family == "gaussian" else PureDP(amount)

    def event(self, cost: Fraction, dimension: int) -> GaussianEvent | LaplaceEvent:
        """The ledger event of a measurement of ``dimension`` cells at ``cost``.

        Its noise multiplier is rounded down: an event claims no more noise than is drawn.

        Example:
            >>> from fractions import Fraction
            >>> Noise(1, "laplace").event(Fraction(1, 2), 3)
            LaplaceEvent(noise_multiplier=2.0, discrete=True, dimension=3)
        """
        if self.family == "gaussian":
            multiplier = round_down(Fraction(self.std(cost)) / self.sensitivity)
            return GaussianEvent(multiplier, discrete=True, dimension=dimension)
        multiplier = round_down(self.scale(cost) / self.sensitivity)
        return LaplaceEvent(multiplier, discrete=True, dimension=dimension)

    def scale(self, epsilon: Fraction) -> Fraction:
        """The discrete Laplace scale of a measurement at ``epsilon``: the float at or above Δ₁/ε.

        At least the least scale the sampler draws: more noise than ε needs,
        never less (ε = Δ₁/b ≤ ``epsilon``).

        Example:
            >>> from fractions import Fraction
            >>> Noise(1, "laplace").scale(Fraction(3, 2)) >= Fraction(2, 3)
            True
        """
        return Fraction(max(laplace_scale(float(self.sensitivity), epsilon), MIN_LAPLACE_SCALE))

    def check(self, cost: Fraction) -> None:
        """Refuse a cost whose noise the sampler cannot draw (σ or b out of its range).

        Called before anything is read or charged.

        Raises:
            InvalidBudgetError: the cost is too small (noise beyond the sampler's range).
        """
        if self.family == "gaussian":
            check_sigma(sigma_for(cost, self.sensitivity))
        else:
            check_laplace_scale(self.scale(cost))

    def std(self, cost: Fraction) -> float:
        """The noise std of one cell measured at ``cost``: σ, or the discrete Laplace's.

        Example:
            >>> from fractions import Fraction
            >>> Noise(1, "gaussian").std(Fraction(1, 2))
            1.0
        """
        if self.family == "gaussian":
            return sigma_for(cost, self.sensitivity)
        # Below MIN_SIGMA the std underflows to 0, which would weigh a measurement infinitely.
        return max(discrete_laplace_std(self.scale(cost)), MIN_SIGMA)

    def mean_error(self, cost: Fraction) -> float:
        """The mean absolute noise of one cell measured at ``cost`` (AIM's discount).

        √(2/π)·σ for the Gaussian; for the discrete Laplace of p = e^(−1/b),
        E|X| = 2p/(1 − p²) (its pmf is (1 − p)/(1 + p)·p^|x|).

        Example:
            >>> from fractions import Fraction
            >>> round(Noise(1, "laplace").mean_error(Fraction(1)), 4)
            0.8509
        """
        if self.family == "gaussian":
            return math.sqrt(2 / math.pi) * self.std(cost)
        p = math.exp(-1 / float(self.scale(cost)))
        return 2 * p / (1 - p * p)

    def epsilon(self, cost: Fraction) -> float:
        """The exponential mechanism's ε that ``cost`` buys: ε²/8 ≤ ρ, or ε itself.

        Example:
            >>> from fractions import Fraction
            >>> Noise(1, "gaussian").epsilon(Fraction(1, 8))
            1.0
        """
        return epsilon_for(cost) if self.family == "gaussian" else round_down(cost)

    def halfwidth(self, cost: Fraction) -> int:
        """The half-width of the exact 95% interval of one cell's noise at ``cost``.

        Example:
            >>> from fractions import Fraction
            >>> Noise(1, "gaussian").halfwidth(Fraction(1, 2))
            2
        """
        if self.family == "gaussian":
            return discrete_gaussian_halfwidth(sigma_for(cost, self.sensitivity))
        return discrete_laplace_halfwidth(self.scale(cost))


class Measurer(Noise):
    """Noisy measurements and selections of one exact table, to be used after the charge.

    ``measure`` and ``choose`` are the only doors to the exact counts; what
    they return is differentially private at the cost stated, in units where
    one person changes each count table by at most ``sensitivity`` rows.

    Example:
        >>> import numpy as np
        >>> from fractions import Fraction
        >>> e = Exact({"a": 2}, np.array([[0], [1]]), np.array([5, 9]))
        >>> m = Measurer(e, 1, "gaussian", None)
        >>> m.measure(("a",), Fraction(10**6)).values.shape
        (2,)
    """

    def __init__(self, exact: Exact, sensitivity: int, family: str, rng: Randomness | None) -> None:
        super().__init__(sensitivity, family)
        self._exact = exact
        self._rng = rng
        # AIM scores the same candidates every round: each exact table is summed once.
        self._tables: dict[tuple[str, ...], npt.NDArray[np.int64]] = {}

    def _table(self, columns: tuple[str, ...]) -> npt.NDArray[np.int64]:
        """The exact count table over ``columns``, summed once per call."""
        if columns not in self._tables:
            self._tables[columns] = self._exact.marginal(columns)
        return self._tables[columns]

    @property
    def domain(self) -> Domain:
        """Each column's number of values."""
        return dict(self._exact.domain)

    def measure(self, columns: tuple[str, ...], cost: Fraction) -> Measured:
        """The marginal over ``columns`` with noise costing ``cost`` (ρ, or ε when pure).

        Returns the noisy counts and their noise std.
        """
        exact = self._table(columns)
        if self.family == "gaussian":
            noise = discrete_gaussian(sigma_for(cost, self.sensitivity), exact.size, rng=self._rng)
        else:
            noise = discrete_laplace(self.scale(cost), exact.size, rng=self._rng)
        values = (exact.reshape(-1) + noise).reshape(exact.shape).astype(np.float64)
        return Measured(columns, values, self.std(cost))

    def choose(
        self,
        candidates: Sequence[tuple[str, ...]],
        estimates: Sequence[npt.NDArray[np.float64]],
        weights: Sequence[int],
        offsets: Sequence[float],
        cost: Fraction,
    ) -> int:
        """The exponential mechanism's pick, at ``cost``, of the candidate the estimates miss most.

        Candidate r's score is ``w_r·(‖exact_r − estimate_r‖₁ − offset_r)``
        (AIM's; MST's with weights 1 and offsets 0). One person moves
        ``exact_r`` by at most ``sensitivity`` in L1, so a score by at most
        ``max w·sensitivity``; the estimates and offsets are public (earlier
        noisy output). The scores are exact rationals (the estimates on a
        2⁻²⁰ grid), so the choice has exactly the exponential mechanism's
        distribution at :meth:`epsilon` of ``cost``: ε-DP, and ε²/8-zCDP.
        """
        scores = []
        for columns, estimate, w, offset in zip(
            candidates, estimates, weights, offsets, strict=True
        ):
            grid = np.rint(np.asarray(estimate, dtype=np.float64) * _GRID).astype(np.int64)
            error = int(np.abs(self._table(tuple(columns)) * _GRID - grid).sum())
            scores.append(w * (Fraction(error, _GRID) - Fraction(offset)))
        best = max(scores)
        factor = Fraction(self.epsilon(cost)) / (2 * max(weights) * self.sensitivity)
        x = [factor * (best - s) for s in scores]
        x_hat = np.array([[float(v) for v in x]])
        return int(exponential_choice(x_hat, lambda _r, i: x[i], self._rng)[0])
