"""Privacy budgets as value types, their conversions, and noise calibration.

A session spends from one of three kinds of budget, each its own value type:

* :class:`zCDP` (zero-concentrated DP, Bun & Steinke 2016): a Gaussian release
  with L2 sensitivity Δ and noise scale σ costs ρ = Δ²/(2σ²), and releases
  compose by adding ρ. :class:`GDP` budgets are spent as zCDP (ρ = μ²/2).
* :class:`PureDP` (ε-DP, Dwork, McSherry, Nissim & Smith 2006): Laplace and
  exponential-mechanism releases cost ε, and releases compose by adding ε.
* :class:`ApproxDP` ((ε, δ)-DP, Dwork & Roth 2014, Def. 2.4): releases cost
  (ε, δ); an accountant charges their composition tightly
  (:mod:`privframe.accounting.accountant`), never more than adding them up.

Conversions between them are stated where they are proven: ε-DP implies
(ε²/2)-zCDP (:meth:`PureDP.implied_zcdp`, an implication, not an allowance),
ρ-zCDP implies (ε, δ)-DP for every δ (:meth:`zCDP.epsilon`), and an (ε, δ)
budget allows the ρ of :meth:`ApproxDP.to_zcdp`.

Budgets are exact rationals (:class:`fractions.Fraction`), as in Tumult
Analytics. A number the user writes is read as written: a float as the
shortest decimal that rounds to it (``0.1`` is exactly 1/10), an int, a
:class:`~fractions.Fraction` or a :class:`~decimal.Decimal` as itself. Sums
and differences of budgets are then exact, so three spends of 0.1 use up a
budget of 0.3 exactly and leave exactly 0. Each budget keeps its exact
parameters in ``exact_*`` fields; ``.rho``, ``.delta``, ``.epsilon`` and
``.mu`` are the nearest floats, for display and plotting.

A value privframe computes (a conversion, a calibration) is a float rounded
conservatively and then used at its exact binary value. A *guarantee* (the ε
a ρ-zCDP mechanism satisfies at δ, the ρ a Gaussian costs, the σ needed for a
target) is rounded towards less privacy claimed: ε, δ, ρ spent and σ round
up. An *allowance* (the ρ a user's (ε, δ) budget lets a session spend)
rounds down. Transcendental functions cannot be evaluated exactly, so each
one carries an explicit floating-point error guard of a few ulps in the safe
direction; their exact inputs are rounded to floats in the safe direction
first.

Example:
    >>> import privframe as pf
    >>> pf.zCDP(0.5) + pf.zCDP(0.25)
    zCDP(rho=0.75, delta=0.0)
    >>> pf.zCDP(0.3) - pf.zCDP(0.1) - pf.zCDP(0.1) - pf.zCDP(0.1)
    zCDP(rho=0.0, delta=0.0)
    >>> pf.zCDP(0.1) <= pf.zCDP(1.0)
    True
    >>> round(pf.zCDP(0.5).epsilon(1e-5), 6)
    4.728387
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from fractions import Fraction

import scipy

from privframe._arguments import hinted
from privframe.accounting.conversions import (
    check_not_larger,
    epsilon_up,
    exp_up,
    from_approx_dp,
    gaussian_log_delta,
    gdp_epsilon,
    zcdp_log_delta_cks,
)
from privframe.errors import InvalidArgumentError, InvalidBudgetError
from privframe.numeric import (
    FLOAT_MAX,
    Number,
    check_conversion_delta,
    check_nonnegative,
    exact,
    exact_conversion_delta,
    exact_delta,
    literal,
    round_down,
    round_up,
    sqrt_down,
    sqrt_up,
)

# ---------------------------------------------------------------------------
# Budget value types
# ---------------------------------------------------------------------------

_FROM_EPSILON = (
    "epsilon states a pure DP budget, pf.PureDP(epsilon=...), or an (epsilon, delta)-DP "
    "one, pf.ApproxDP(epsilon=..., delta=...), which a Session takes as they are; "
    "pf.zCDP.from_approx_dp(epsilon, delta) gives the rho that implies one"
)
# The hints for a budget given in another model's parameters, by the parameter's name.
_OTHER_MODELS = {
    "rho": "rho states a zCDP budget: pf.zCDP(rho=..., delta=...)",
    "epsilon": _FROM_EPSILON,
    "eps": _FROM_EPSILON,
    "mu": "mu states a Gaussian DP budget: pf.GDP(mu=...)",
}


def _hints(*names: str) -> dict[str, str]:
    return {name: _OTHER_MODELS[name] for name in names}


class _Ordered:
    """The partial order of budgets of one type: ``a <= b`` when every field is.

    Budgets are dataclasses whose fields are all privacy parameters, so
    ``a <= b`` means ``a`` is at least as private as ``b`` in every one;
    ``a < b`` means ``a <= b`` and ``a != b``. Budgets of different types do
    not compare (``TypeError``), and some of one type are incomparable.

    Example:
        >>> import privframe as pf
        >>> pf.ApproxDP(0.5, 1e-9) < pf.ApproxDP(1.0, 1e-9)
        True
        >>> a, b = pf.zCDP(1.0), pf.zCDP(0.5, delta=1e-9)
        >>> a <= b or b <= a
        False
    """

    __slots__ = ()

    def _parameters(self) -> tuple[Fraction, ...]:
        # Privacy parameters only: fields excluded from == (provenance) do not order either.
        return tuple(
            getattr(self, f.name)
            for f in fields(self)  # type: ignore[arg-type]  # every subclass is a dataclass
            if f.compare
        )

    def __le__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return all(a <= b for a, b in zip(self._parameters(), other._parameters(), strict=True))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return self <= other and self._parameters() != other._parameters()

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return other <= self

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return other < self


@dataclass(frozen=True, slots=True, init=False, repr=False)
class zCDP(_Ordered):
    """A ρ-zCDP budget, optionally approximate: (ρ, δ)-zCDP.

    ``delta`` is nonzero only for sessions that spend δ outright, e.g. on
    private partition selection; Gaussian releases cost ρ alone.

    ρ and δ are exact rationals (see the module docstring for how a float is
    read): ``exact_rho`` and ``exact_delta`` hold them, and ``rho`` and
    ``delta`` are the nearest floats, for display. Sums and differences are
    exact. The repr shows a value as a float literal when that literal is
    exact (``0.9``), and rounded to six digits, marked ``≈``, otherwise (1/3,
    or the binary value of a converted budget).

    ``converted_from`` records the (ε, δ) budget this one was converted from
    by :meth:`ApproxDP.to_zcdp` (or :func:`to_zcdp`). It is provenance, not a
    privacy parameter: it takes no part in ``==``, hashing, ordering or
    arithmetic (a sum or difference has none). An
    :class:`~privframe.accounting.accountant.Accountant` given such a budget reports
    (ε, δ) at the source's δ by default. Giving it is a claim that is checked:
    this budget stated at the source's total δ must be within the source's ε,
    i.e. ``self.epsilon(source.delta) <= source.epsilon``.

    Args:
        rho: the zCDP parameter ρ >= 0 (Bun & Steinke 2016, Def. 1.1).
        delta: the additive δ of approximate zCDP, 0 <= δ < 1.
        converted_from: keyword only; the :class:`ApproxDP` budget this one
            implies, or None.

    Raises:
        InvalidArgumentError: ``converted_from`` is neither None nor an ApproxDP.
        InvalidBudgetError: a malformed ρ or δ, or a ``converted_from`` this
            budget does not imply.

    Example:
        >>> from fractions import Fraction
        >>> import privframe as pf
        >>> b = pf.zCDP(0.5)
        >>> b.rho, b.delta
        (0.5, 0.0)
        >>> pf.zCDP(0.1, delta=1e-9) + pf.zCDP(0.2)
        zCDP(rho=0.3, delta=1e-09)
        >>> pf.zCDP(1.0) - pf.zCDP(0.1)
        zCDP(rho=0.9, delta=0.0)
        >>> third = pf.zCDP(Fraction(1, 3))
        >>> third, third + third + third == pf.zCDP(1)
        (zCDP(rho≈0.333333, delta=0.0), True)
        >>> c = pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=1e-7)
        >>> c.converted_from, c == pf.zCDP(c.exact_rho, delta=1e-7)
        (ApproxDP(epsilon=1.0, delta=1e-06), True)
    """

    exact_rho: Fraction
    exact_delta: Fraction
    converted_from: ApproxDP | None = field(default=None, compare=False)

    @hinted(rho="pass rho=..., e.g. pf.zCDP(rho=1.0)", **_hints("epsilon", "eps", "mu"))
    def __init__(
        self, rho: Number, delta: Number = 0.0, *, converted_from: ApproxDP | None = None
    ) -> None:
        object.__setattr__(self, "exact_rho", exact("rho", rho))
        object.__setattr__(self, "exact_delta", exact_delta(delta))
        object.__setattr__(self, "converted_from", converted_from)
        source = converted_from
        if source is None:
            return
        if not isinstance(source, ApproxDP):
            raise InvalidArgumentError(
                f"converted_from must be an ApproxDP or None, got {type(source).__name__}"
            )
        if not self.exact_delta < source.exact_delta:
            raise InvalidBudgetError(
                f"converted_from={source!r} must have a delta larger than this budget's "
                f"delta={self.delta!r}, which is spent outright"
            )
        if self.epsilon(source.exact_delta) > source.exact_epsilon:
            raise InvalidBudgetError(
                f"{self!r} does not imply converted_from={source!r}; use "
                f"{source!r}.to_zcdp(...) to convert"
            )

    @property
    def rho(self) -> float:
        """ρ as the nearest float, for display; :attr:`exact_rho` is the exact value.

        Example:
            >>> import privframe as pf
            >>> pf.zCDP(0.1).rho, pf.zCDP(0.1).exact_rho
            (0.1, Fraction(1, 10))
        """
        return float(self.exact_rho)

    @property
    def delta(self) -> float:
        """δ as the nearest float, for display; :attr:`exact_delta` is the exact value.

        Example:
            >>> import privframe as pf
            >>> pf.zCDP(1.0, delta=1e-7).delta
            1e-07
        """
        return float(self.exact_delta)

    def __repr__(self) -> str:
        # The provenance is shown when present: it sets an accountant's reporting δ.
        source = "" if self.converted_from is None else f", converted_from={self.converted_from!r}"
        rho, delta = literal("rho", self.exact_rho), literal("delta", self.exact_delta)
        return f"zCDP({rho}, {delta}{source})"

    def __add__(self, other: zCDP) -> zCDP:
        """Compose two zCDP budgets: ρ and δ add (Bun & Steinke 2016, Lemma 2.3), exactly."""
        if not isinstance(other, zCDP):
            return NotImplemented
        return zCDP(self.exact_rho + other.exact_rho, self.exact_delta + other.exact_delta)

    def __sub__(self, other: zCDP) -> zCDP:
        """What is left of ``self`` after ``other``, exactly; refused if negative."""
        if not isinstance(other, zCDP):
            return NotImplemented
        check_not_larger("rho", self.exact_rho, other.exact_rho)
        check_not_larger("delta", self.exact_delta, other.exact_delta)
        return zCDP(self.exact_rho - other.exact_rho, self.exact_delta - other.exact_delta)

    def epsilon(self, delta: Number) -> float:
        """The ε for which every mechanism with this budget is (ε, ``delta``)-DP.

        The minimum of two bounds valid for *any* ρ-zCDP mechanism, rounded up:

        - Bun & Steinke 2016 (arXiv 1605.02065), Prop. 1.3:
          ε = ρ + 2 sqrt(ρ ln(1/δ));
        - Canonne, Kamath & Steinke 2020 (arXiv 2004.00010), Sec. 2.3,
          Prop. 12 / Cor. 13: ε = inf_{α>1} αρ + [ln(1/δ) + (α−1) ln(1−1/α)
          − ln α]/(α−1), minimised at the root of ρ(α−1)² + ln(αδ) = 0.

        The CKS bound is never larger in exact arithmetic; the simple bound is
        kept as a floor against numerical trouble. Tighter *Gaussian-only*
        curves (:meth:`GDP.epsilon`) are not used here, because sessions also
        run mechanisms (discrete Gaussian, partition selection) that are
        ρ-zCDP but not exactly Gaussian.

        For an approximate budget (ρ, δ₀) with δ₀ > 0, ``delta`` is the total:
        it must exceed δ₀, and ρ is converted at ``delta`` − δ₀. The formulas
        are evaluated in floats at ρ rounded up and δ − δ₀ rounded down, both
        of which can only raise ε. ρ = 0 gives ε = 0.

        Args:
            delta: the total δ of the (ε, δ) statement, δ₀ < δ < 1 (read
                exactly, as budgets are).

        Returns:
            ε >= 0, rounded up.

        Raises:
            InvalidBudgetError: if ``delta`` is not in (δ₀, 1).

        Example:
            >>> import privframe as pf
            >>> round(pf.zCDP(0.5).epsilon(1e-5), 6)
            4.728387
            >>> pf.zCDP(0.0).epsilon(1e-5)
            0.0
        """
        total = exact_conversion_delta(delta)
        if total <= self.exact_delta:
            raise InvalidBudgetError(
                f"delta must exceed this budget's own delta ({self.delta!r}), got {delta!r}"
            )
        if self.exact_rho == 0:
            return 0.0
        residual = round_down(total - self.exact_delta)
        if residual == 0:
            return math.inf  # a residual below the smallest float: no finite ε is certified
        return epsilon_up(round_up(self.exact_rho), residual)

    def delta_at(self, epsilon: Number) -> float:
        """The δ for which every mechanism with this budget is (``epsilon``, δ)-DP.

        Named ``delta_at`` because ``delta`` is the budget's own δ₀ field.
        Canonne, Kamath & Steinke 2020 (arXiv 2004.00010), Sec. 2.3, Cor. 13:
        δ = inf_{α>1} exp((α−1)(αρ − ε)) (1 − 1/α)^α / (α−1), minimised where
        (2α−1)ρ − ε + ln(1 − 1/α) = 0; plus δ₀, rounded up and capped at 1.
        Evaluated at ρ rounded up and ε rounded down.

        Args:
            epsilon: ε >= 0.

        Returns:
            δ in [0, 1].

        Raises:
            InvalidBudgetError: on a malformed ε.

        Example:
            >>> import privframe as pf
            >>> b = pf.zCDP(0.5)
            >>> abs(b.delta_at(b.epsilon(1e-5)) / 1e-5 - 1) < 1e-12
            True
            >>> pf.zCDP(0.0, delta=1e-9).delta_at(1.0)
            1e-09
        """
        eps = round_down(exact("epsilon", epsilon))
        rho = round_up(self.exact_rho)
        base = 0.0 if rho == 0 else exp_up(zcdp_log_delta_cks(rho, eps))
        return min(1.0, round_up(Fraction(base) + self.exact_delta))

    def to_gdp(self) -> GDP:
        """The Gaussian-equivalent μ = sqrt(2ρ), rounded up.

        A reporting unit, not an implication. A composition of continuous
        Gaussian releases with total ρ is exactly sqrt(2ρ)-GDP (Bun & Steinke
        2016, Prop. 1.6; Dong, Roth & Su 2022, Cor. 3.3), but ρ-zCDP does *not*
        imply sqrt(2ρ)-GDP for general mechanisms. privframe's discrete
        Gaussian releases are ρ-zCDP (Canonne, Kamath & Steinke 2020) without
        being exactly GDP, so the (ε, δ) privframe states is
        :meth:`epsilon`, not :meth:`GDP.epsilon`.

        Returns:
            ``GDP(mu)`` with ``mu`` the smallest float with mu² >= 2ρ.

        Example:
            >>> import privframe as pf
            >>> pf.zCDP(0.5).to_gdp()
            GDP(mu=1.0)
        """
        return GDP(Fraction(sqrt_up(2 * self.exact_rho)))

    @classmethod
    @hinted()
    def from_approx_dp(cls, epsilon: Number, delta: Number) -> zCDP:
        """The largest ρ such that ρ-zCDP implies (ε, δ)-DP, rounded down.

        Inverts the Canonne, Kamath & Steinke 2020 (Sec. 2.3, Cor. 13)
        conversion: ρ* = sup_{α>1} [ε − (ln(1/δ) − ln α)/(α−1) − ln(1−1/α)]/α.
        Every α gives a valid ρ, so the sup is taken at the α where the CKS
        optimum ρ(α−1)² = ln(1/(αδ)) meets ε(α) = ε (a root of a decreasing
        function of α on (1, 1/δ)), floored by the Bun & Steinke 2016 inverse
        (sqrt(ln(1/δ) + ε) − sqrt(ln(1/δ)))². ε and δ enter rounded down to
        floats (a smaller ρ). Finally ρ is lowered until
        ``zCDP(rho).epsilon(delta) <= epsilon`` holds for privframe's own
        (rounded-up) conversion, so a round trip never exceeds ε. The result
        is that float, kept at its exact binary value.

        Args:
            epsilon: ε >= 0.
            delta: δ in (0, 1). A pure ε-DP budget (δ = 0) cannot be met by
                zCDP mechanisms and is refused.

        Returns:
            ``zCDP(rho)`` with ``delta=0``.

        Raises:
            InvalidBudgetError: on a malformed ε or δ.

        Example:
            >>> import privframe as pf
            >>> b = pf.zCDP.from_approx_dp(1.0, 1e-5)
            >>> round(b.rho, 8)
            0.0305566
            >>> b.epsilon(1e-5) <= 1.0
            True
        """
        return cls(
            Fraction(from_approx_dp(exact("epsilon", epsilon), exact_conversion_delta(delta)))
        )


@dataclass(frozen=True, slots=True, init=False, repr=False)
class PureDP(_Ordered):
    """A pure ε-DP budget (Dwork, McSherry, Nissim & Smith 2006; Dwork & Roth 2014, Def. 2.4).

    Adding two composes them by basic composition (ε adds: Dwork & Roth
    2014, Thm. 3.16 with δ = 0), which is exact for pure DP's accounting;
    subtracting gives what is left, refused below zero. ε is an exact
    rational (``exact_epsilon``; ``epsilon`` is the nearest float), read as
    :class:`zCDP` reads its parameters, so ten spends of 0.1 use up 1.0
    exactly.

    Args:
        epsilon: ε >= 0.

    Raises:
        InvalidArgumentError: ``epsilon`` is not a real number, or a
            parameter of another kind of budget is passed (``rho``,
            ``delta``, ``mu``), with the type that takes it.
        InvalidBudgetError: a negative, NaN or infinite ε.

    Example:
        >>> import privframe as pf
        >>> pf.PureDP(0.5) + pf.PureDP(0.25)
        PureDP(epsilon=0.75)
        >>> sum([pf.PureDP(0.1)] * 10, pf.PureDP(0)) == pf.PureDP(1)
        True
        >>> pf.PureDP(1.0) - pf.PureDP(0.1)
        PureDP(epsilon=0.9)
        >>> pf.PureDP(0.1) <= pf.PureDP(0.2)
        True
    """

    exact_epsilon: Fraction

    @hinted(
        delta="a pure DP budget has no delta: pf.ApproxDP(epsilon=..., delta=...) states one",
        **_hints("rho", "mu"),
    )
    def __init__(self, epsilon: Number) -> None:
        object.__setattr__(self, "exact_epsilon", exact("epsilon", epsilon))

    @property
    def epsilon(self) -> float:
        """ε as the nearest float; :attr:`exact_epsilon` is the exact value.

        Example:
            >>> import privframe as pf
            >>> pf.PureDP(0.1).epsilon, pf.PureDP(0.1).exact_epsilon
            (0.1, Fraction(1, 10))
        """
        return float(self.exact_epsilon)

    def __repr__(self) -> str:
        return f"PureDP({literal('epsilon', self.exact_epsilon)})"

    def __add__(self, other: PureDP) -> PureDP:
        """Basic composition: ε adds (Dwork & Roth 2014, Thm. 3.16), exactly."""
        if not isinstance(other, PureDP):
            return NotImplemented
        return PureDP(self.exact_epsilon + other.exact_epsilon)

    def __sub__(self, other: PureDP) -> PureDP:
        """What is left of ``self`` after ``other``, exactly; refused if negative."""
        if not isinstance(other, PureDP):
            return NotImplemented
        check_not_larger("epsilon", self.exact_epsilon, other.exact_epsilon)
        return PureDP(self.exact_epsilon - other.exact_epsilon)

    def implied_zcdp(self) -> zCDP:
        """The ρ = ε²/2 that every ε-DP mechanism satisfies, exactly.

        Bun & Steinke 2016 (arXiv 1605.02065), Prop. 1.4 (proved as Prop.
        3.3): ε-DP implies (ε²/2)-zCDP. It is an implication, not an
        allowance: a pure-DP release may be counted in a zCDP session at this
        ρ, but a zCDP session spending this ρ is not ε-DP (zCDP bounds Rényi
        divergences, and no ρ bounds the worst-case loss), so there is no
        ``to_zcdp`` and :func:`to_zcdp` refuses a PureDP budget. ε is exact,
        so ε²/2 is too.

        Raises:
            InvalidBudgetError: ε²/2 is beyond the float range.

        Example:
            >>> import privframe as pf
            >>> pf.PureDP(1.0).implied_zcdp()
            zCDP(rho=0.5, delta=0.0)
        """
        rho = self.exact_epsilon**2 / 2
        if rho > FLOAT_MAX:
            raise InvalidBudgetError(
                f"epsilon={self.epsilon!r} is too large: rho = epsilon**2/2 exceeds the float range"
            )
        return zCDP(rho)

    def to_approx_dp(self) -> ApproxDP:
        """The same guarantee as an (ε, 0)-DP budget: ε-DP is (ε, δ)-DP with δ = 0.

        Example:
            >>> import privframe as pf
            >>> pf.PureDP(0.5).to_approx_dp()
            ApproxDP(epsilon=0.5, delta=0.0)
        """
        return ApproxDP(self.exact_epsilon, 0)


@dataclass(frozen=True, slots=True, init=False, repr=False)
class ApproxDP(_Ordered):
    """An (ε, δ)-DP budget (Dwork & Roth 2014, Def. 2.4).

    Adding two composes them by basic composition (ε and δ add);
    subtracting gives what is left. Both are exact: ε and δ are exact
    rationals (``exact_epsilon``, ``exact_delta``; ``epsilon`` and ``delta``
    are the nearest floats), read as :class:`zCDP` reads its parameters.

    Given to an :class:`~privframe.accounting.accountant.Accountant` (or a
    Session), it is spent as (ε, δ): releases cost (ε, δ) and the accountant
    charges their composition tightly (never more than basic composition).
    To spend it as zCDP instead, give :meth:`to_zcdp` (the ρ it allows).

    Args:
        epsilon: ε >= 0.
        delta: 0 <= δ < 1.

    Example:
        >>> import privframe as pf
        >>> pf.ApproxDP(1.0, 1e-6) + pf.ApproxDP(0.5, 1e-6)
        ApproxDP(epsilon=1.5, delta=2e-06)
    """

    exact_epsilon: Fraction
    exact_delta: Fraction

    @hinted(**_hints("rho", "mu"))
    def __init__(self, epsilon: Number, delta: Number = 0.0) -> None:
        object.__setattr__(self, "exact_epsilon", exact("epsilon", epsilon))
        object.__setattr__(self, "exact_delta", exact_delta(delta))

    @property
    def epsilon(self) -> float:
        """ε as the nearest float; :attr:`exact_epsilon` is the exact value.

        Example:
            >>> import privframe as pf
            >>> pf.ApproxDP(1.0, 1e-6).epsilon
            1.0
        """
        return float(self.exact_epsilon)

    @property
    def delta(self) -> float:
        """δ as the nearest float; :attr:`exact_delta` is the exact value.

        Example:
            >>> import privframe as pf
            >>> pf.ApproxDP(1.0, 1e-6).delta
            1e-06
        """
        return float(self.exact_delta)

    def __repr__(self) -> str:
        return (
            f"ApproxDP({literal('epsilon', self.exact_epsilon)}, "
            f"{literal('delta', self.exact_delta)})"
        )

    def __add__(self, other: ApproxDP) -> ApproxDP:
        """Basic composition (Dwork & Roth 2014, Thm. 3.16), exactly."""
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return ApproxDP(
            self.exact_epsilon + other.exact_epsilon, self.exact_delta + other.exact_delta
        )

    def __sub__(self, other: ApproxDP) -> ApproxDP:
        """What is left of ``self`` after ``other`` under basic composition, exactly."""
        if not isinstance(other, ApproxDP):
            return NotImplemented
        check_not_larger("epsilon", self.exact_epsilon, other.exact_epsilon)
        check_not_larger("delta", self.exact_delta, other.exact_delta)
        return ApproxDP(
            self.exact_epsilon - other.exact_epsilon, self.exact_delta - other.exact_delta
        )

    @hinted(delta="pass selection_delta=...: the part of this delta kept for choosing groups")
    def to_zcdp(self, selection_delta: Number = 0.0) -> zCDP:
        """The zCDP allowance this (ε, δ) budget lets a session spend, rounded down.

        Returns ``zCDP(rho, delta=selection_delta, converted_from=self)``: δ_s =
        ``selection_delta`` is kept exactly, to be spent outright on private
        partition selection (privacy.md §6), and ρ = :meth:`zCDP.from_approx_dp`
        (ε, δ₁) with δ₁ = δ − δ_s (exact), so δ₁ + δ_s = δ.
        ``selection_delta=0`` (the default) is the all-to-ρ conversion of
        :func:`to_zcdp`.

        Why it is valid. A session that spends at most (ρ, δ_s) is (ρ, δ_s)-
        approximately zCDP: ρ and δ add under composition (Bun & Steinke
        2016, arXiv 1605.02065, approximate zCDP). That is, for neighbouring
        inputs x, x′ there are events E, E′ with probability >= 1 − δ_s such
        that P = M(x)|E and P′ = M(x′)|E′ have D_α(P‖P′) <= ρα for all α > 1.
        The CKS conversion applies to the pair: P(S) <= e^ε₁ P′(S) + δ₁ with
        ε₁ = ``zCDP(rho).epsilon(δ₁)`` (Canonne, Kamath & Steinke 2020,
        Prop. 12 / Cor. 13). Since P[E] >= 1 − δ_s, M(x) = (1 − δ_s)P + δ_s Q for
        some Q, and (1 − δ_s)P′(S) <= P[E′]P′(S) <= M(x′)(S); so for every S,
        M(x)(S) <= (1 − δ_s)(e^ε₁ P′(S) + δ₁) + δ_s <= e^ε₁ M(x′)(S) + δ₁ + δ_s.
        ρ is chosen so that ε₁ <= ε (certified with privframe's rounded-up
        conversion), and δ₁ + δ_s = δ: the session is (ε, δ)-DP.

        This is an allowance, the budget-side conversion. (The other
        direction, which :meth:`GDP.to_zcdp` takes, does not exist here: an
        (ε, δ)-DP mechanism need not be ρ-zCDP for any ρ.)

        Args:
            selection_delta: δ_s, 0 <= δ_s < δ: the part of δ to reserve.

        Returns:
            the :class:`zCDP` allowance, carrying this budget as
            ``converted_from`` so that an accountant reports (ε, δ) at this δ.

        Raises:
            InvalidArgumentError: ``selection_delta`` is not a real number.
            InvalidBudgetError: ``selection_delta`` is NaN, infinite, negative
                or not below δ; or δ = 0 (pure DP, which Gaussian releases
                cannot meet).

        Example:
            >>> import privframe as pf
            >>> b = pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=1e-7)
            >>> round(b.rho, 8), b.delta
            (0.02412962, 1e-07)
            >>> b.epsilon(1e-6) <= 1.0  # stated at the total δ: within ε
            True
            >>> pf.ApproxDP(1.0, 1e-6).to_zcdp() == pf.zCDP.from_approx_dp(1.0, 1e-6)
            True
        """
        reserve = exact("selection_delta", selection_delta)
        if self.exact_delta == 0:
            raise InvalidBudgetError(
                f"{self!r} is a pure-DP budget, which Gaussian (zCDP) releases cannot "
                "meet; give a delta in (0, 1), e.g. 1e-6"
            )
        if reserve >= self.exact_delta:
            raise InvalidBudgetError(
                f"selection_delta must be below the budget's delta={self.delta!r}, got "
                f"{selection_delta!r}; the rest of delta converts to rho (e.g. reserve a "
                f"tenth: selection_delta={float(self.exact_delta / 10)!r})"
            )
        rho = from_approx_dp(self.exact_epsilon, self.exact_delta - reserve)
        return zCDP(Fraction(rho), reserve, converted_from=self)


@dataclass(frozen=True, slots=True, init=False, repr=False)
class GDP(_Ordered):
    """A μ-Gaussian-DP budget (Dong, Roth & Su 2022, Def. 2.6).

    μ-GDP composes as μ = sqrt(μ₁² + μ₂²) (their Cor. 3.3). A Gaussian
    mechanism with sensitivity Δ and std σ is exactly (Δ/σ)-GDP, which is also
    Δ²/(2σ²)-zCDP; so μ = sqrt(2ρ) for Gaussian releases. μ is read exactly
    (``exact_mu``; ``mu`` is the nearest float); a composition, being a square
    root, is rounded up to a float (a difference down).

    Args:
        mu: μ >= 0.

    Example:
        >>> import privframe as pf
        >>> pf.GDP(3.0) + pf.GDP(4.0)
        GDP(mu=5.0)
        >>> pf.GDP(5.0) - pf.GDP(4.0)
        GDP(mu=3.0)
    """

    exact_mu: Fraction

    @hinted(
        delta="a Gaussian DP budget has no delta: pf.GDP(mu=...) gives every (epsilon, delta)",
        **_hints("rho", "epsilon", "eps"),
    )
    def __init__(self, mu: Number) -> None:
        object.__setattr__(self, "exact_mu", exact("mu", mu))

    @property
    def mu(self) -> float:
        """μ as the nearest float; :attr:`exact_mu` is the exact value.

        Example:
            >>> import privframe as pf
            >>> pf.GDP(0.5).mu
            0.5
        """
        return float(self.exact_mu)

    def __repr__(self) -> str:
        return f"GDP({literal('mu', self.exact_mu)})"

    def __add__(self, other: GDP) -> GDP:
        """Compose: μ = sqrt(μ₁² + μ₂²), rounded up."""
        if not isinstance(other, GDP):
            return NotImplemented
        try:
            return GDP(Fraction(sqrt_up(self.exact_mu**2 + other.exact_mu**2)))
        except OverflowError:
            raise InvalidBudgetError(
                f"composed mu of {self.mu!r} and {other.mu!r} exceeds the float range"
            ) from None

    def __sub__(self, other: GDP) -> GDP:
        """What is left of ``self`` after ``other``: μ = sqrt(μ₁² − μ₂²), rounded down.

        The inverse of composition (Dong, Roth & Su 2022, Cor. 3.3): spending
        μ₂ out of μ₁ leaves every μ with μ₂² + μ² <= μ₁².
        """
        if not isinstance(other, GDP):
            return NotImplemented
        check_not_larger("mu", self.exact_mu, other.exact_mu)
        return GDP(Fraction(sqrt_down(self.exact_mu**2 - other.exact_mu**2)))

    def delta(self, epsilon: Number) -> float:
        """δ(ε) on the exact μ-GDP curve, rounded up.

        δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su 2022,
        Cor. 2.13; Balle & Wang 2018, Thm. 8), evaluated in log space at μ
        rounded up and ε rounded down.

        Args:
            epsilon: ε >= 0.

        Returns:
            δ in [0, 1].

        Example:
            >>> import privframe as pf
            >>> round(pf.GDP(1.0).delta(1.0), 6)
            0.126937
        """
        eps = round_down(exact("epsilon", epsilon))
        return exp_up(gaussian_log_delta(round_up(self.exact_mu), eps, upper=True))

    def epsilon(self, delta: Number) -> float:
        """The smallest ε with δ(ε) <= ``delta`` on the exact μ-GDP curve, rounded up.

        Same curve as :meth:`delta` (Dong, Roth & Su 2022, Cor. 2.13), solved
        with Brent's method and then raised until a rounded-up evaluation of
        δ(ε) is <= ``delta``, at μ rounded up and δ rounded down. Exact for
        compositions of *continuous* Gaussian releases only; see
        :meth:`zCDP.to_gdp` for why privframe's stated (ε, δ) is the zCDP one.

        Args:
            delta: δ in (0, 1).

        Returns:
            ε >= 0.

        Example:
            >>> import privframe as pf
            >>> round(pf.GDP(1.0).epsilon(1e-5), 6)
            4.377178
        """
        delta_f = round_down(exact_conversion_delta(delta))
        if delta_f == 0:
            return math.inf
        return gdp_epsilon(round_up(self.exact_mu), delta_f)

    def to_zcdp(self) -> zCDP:
        """The ρ = μ²/2 that a μ-GDP mechanism satisfies, exactly.

        μ-GDP implies (μ²/2)-zCDP: by Blackwell's theorem (Dong, Roth & Su
        2022, Sec. 2) a μ-GDP pair is a post-processing of
        (N(0,1), N(μ,1)), whose Rényi divergence of order α is αμ²/2. μ is
        exact, so μ²/2 is too: no rounding either way.

        Example:
            >>> import privframe as pf
            >>> pf.GDP(1.0).to_zcdp()
            zCDP(rho=0.5, delta=0.0)
        """
        return _half_square(self)


def mu_estimate(epsilon: float, delta: float) -> float:
    """The μ whose μ-GDP curve passes through (ε, δ): a one-number summary.

    μ-GDP (Dong, Roth & Su 2022) describes a whole privacy curve by one number;
    a curve that is not Gaussian has no exact μ, and this is the μ of the
    Gaussian curve that agrees with it at δ. It is exact for compositions of
    continuous Gaussians and an estimate otherwise (the GDP central limit
    theorem, their Thm. 3.4, says subsampled compositions approach a Gaussian
    curve). It is a summary, not a guarantee at other δ.

    Args:
        epsilon: ε >= 0 (``inf`` gives ``inf``).
        delta: δ in (0, 1).

    Example:
        >>> import privframe as pf
        >>> round(mu_estimate(pf.GDP(1.5).epsilon(1e-6), 1e-6), 6)
        1.5
    """
    eps = check_nonnegative("epsilon", epsilon) if not math.isinf(epsilon) else math.inf
    delta = check_conversion_delta(delta)
    if math.isinf(eps):
        return math.inf
    if eps == 0:
        return 0.0
    hi = 1.0
    while GDP(hi).epsilon(delta) < eps:
        hi *= 2
        if hi > 2.0**60:
            return math.inf
    return float(
        scipy.optimize.brentq(lambda mu: GDP(mu).epsilon(delta) - eps, 0.0, hi, xtol=1e-12)
    )


Budget = zCDP | PureDP | ApproxDP | GDP
"""Any budget a user may hand to privframe.

An :class:`~privframe.accounting.accountant.Accountant` given a :class:`zCDP`
or :class:`GDP` budget accounts in zCDP, given a :class:`PureDP` one in ε, and
given an :class:`ApproxDP` one in (ε, δ).
"""


def _half_square(budget: GDP) -> zCDP:
    """zCDP(μ²/2), exactly; refused beyond the float range."""
    rho = budget.exact_mu**2 / 2
    if rho > FLOAT_MAX:
        raise InvalidBudgetError(
            f"mu={budget.mu!r} is too large: rho = mu**2/2 exceeds the float range"
        )
    return zCDP(rho)


def to_zcdp(budget: Budget) -> zCDP:
    """The zCDP allowance a budget of any kind allows: what to give a zCDP session.

    An :class:`~privframe.accounting.accountant.Accountant` spends a
    :class:`PureDP` or :class:`ApproxDP` budget in its own kind; this
    converts one for an accountant (a Session) that should account in zCDP.

    - ``zCDP``: itself (including any δ for partition selection).
    - ``PureDP(ε)``: refused. A zCDP session spending any ρ is not ε-DP (ε-DP
      implies (ε²/2)-zCDP, :meth:`PureDP.implied_zcdp`, but not the other
      way), so a pure-DP budget has no zCDP allowance: spend it in a pure-DP
      session.
    - ``ApproxDP(ε, δ)``: :meth:`zCDP.from_approx_dp` (Canonne, Kamath &
      Steinke 2020 inverse), rounded down; all of δ goes to the conversion,
      so a session with this budget cannot choose groups privately. δ = 0 is
      refused. To keep part of δ for partition selection, convert it
      yourself with :meth:`ApproxDP.to_zcdp` (``selection_delta=...``) and
      give the result.
    - ``GDP(μ)``: ρ = μ²/2, exactly. Caveat: the session then guarantees
      ρ-zCDP; that equals μ-GDP only if every release is a continuous Gaussian
      (Dong, Roth & Su 2022). privframe's discrete Gaussian releases are ρ-zCDP
      (Canonne, Kamath & Steinke 2020) but not exactly μ-GDP.

    Args:
        budget: a :class:`zCDP`, :class:`PureDP`, :class:`ApproxDP` or :class:`GDP`.

    Returns:
        the :class:`zCDP` allowance.

    Raises:
        InvalidBudgetError: for a PureDP budget, an unknown budget type or an
            ApproxDP with δ = 0.

    Example:
        >>> import privframe as pf
        >>> from privframe.accounting.budgets import to_zcdp
        >>> to_zcdp(pf.GDP(1.0))
        zCDP(rho=0.5, delta=0.0)
        >>> round(to_zcdp(pf.ApproxDP(1.0, 1e-5)).rho, 8)
        0.0305566
    """
    if isinstance(budget, zCDP):
        return budget
    if isinstance(budget, PureDP):
        raise InvalidBudgetError(
            f"{budget!r} has no zCDP allowance: a session spending rho-zCDP is not "
            "epsilon-DP for any epsilon (epsilon-DP implies (epsilon**2/2)-zCDP, not the "
            "other way). Spend it as pure DP (Session(..., budget=pf.PureDP(...))), or state "
            "a zCDP or an (epsilon, delta) budget"
        )
    if isinstance(budget, ApproxDP):
        return budget.to_zcdp()
    if isinstance(budget, GDP):
        return _half_square(budget)
    raise InvalidBudgetError(
        f"budget must be a zCDP, PureDP, ApproxDP or GDP, got {type(budget).__name__}"
    )
