"""Budget values: input validation, exact arithmetic and order, the same for the three types."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import privframe as pf
from privframe import numeric
from privframe.accounting import calibration, conversions
from privframe.errors import CalibrationError, InvalidArgumentError, InvalidBudgetError

# ---------------------------------------------------------------------------
# Input validation: our errors, naming the parameter, never a scipy traceback
# ---------------------------------------------------------------------------

NOT_FINITE = (math.nan, math.inf, -math.inf)


SECRET = 0.123456789  # stands for a value no message may repeat


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: pf.zCDP(epsilon=SECRET), ["'epsilon'", "pf.ApproxDP(epsilon=", "from_approx_dp"]),
        (lambda: pf.zCDP(SECRET, mu=SECRET), ["'mu'", "pf.GDP(mu=...)"]),
        (lambda: pf.zCDP(SECRET, delt=SECRET), ["'delt'", "did you mean delta=...?"]),
        (lambda: pf.ApproxDP(rho=SECRET), ["'rho'", "pf.zCDP(rho=", "missing the argument"]),
        (lambda: pf.ApproxDP(eps=SECRET, delta=SECRET), ["did you mean epsilon=...?"]),
        (lambda: pf.GDP(SECRET, delta=SECRET), ["GDP() got", "has no delta"]),
        (lambda: pf.GDP(epsilon=SECRET), ["pf.ApproxDP(epsilon="]),
        (
            lambda: pf.zCDP.from_approx_dp(eps=SECRET, delta=SECRET),
            ["zCDP.from_approx_dp() got", "takes: epsilon, delta."],
        ),
        (
            lambda: pf.ApproxDP(1.0, 1e-6).to_zcdp(delta=SECRET),
            ["ApproxDP.to_zcdp() got", "pass selection_delta=..."],
        ),
    ],
)
def test_budget_constructors_refuse_unknown_keywords_with_a_hint(build: Any, says: list) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        build()
    message = str(caught.value)
    for part in says:
        assert part in message
    assert "takes:" in message
    assert "0.123" not in message
    assert isinstance(caught.value, TypeError)
    assert caught.value.__context__ is None


@pytest.mark.parametrize("bad", [*NOT_FINITE, -1.0, 0.0, 1.0, 1.5])
def test_conversion_delta_validated(bad: object) -> None:
    calls = [
        lambda: pf.zCDP(0.5).epsilon(bad),  # type: ignore[arg-type]
        lambda: pf.GDP(1.0).epsilon(bad),  # type: ignore[arg-type]
        lambda: pf.zCDP.from_approx_dp(1.0, bad),  # type: ignore[arg-type]
        lambda: calibration.analytic_gaussian_sigma(1.0, 1.0, bad),  # type: ignore[arg-type]
        lambda: calibration.classical_gaussian_sigma(1.0, 0.5, bad),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidBudgetError, match="delta"):
            call()


@pytest.mark.parametrize("bad", [*NOT_FINITE, -1.0, -1e-300, 10**400])
def test_epsilon_validated(bad: object) -> None:
    calls = [
        lambda: pf.zCDP(0.5).delta_at(bad),  # type: ignore[arg-type]
        lambda: pf.GDP(1.0).delta(bad),  # type: ignore[arg-type]
        lambda: pf.zCDP.from_approx_dp(bad, 1e-6),  # type: ignore[arg-type]
        lambda: calibration.analytic_gaussian_sigma(1.0, bad, 1e-6),  # type: ignore[arg-type]
        lambda: calibration.classical_gaussian_sigma(1.0, bad, 1e-6),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidBudgetError, match="epsilon"):
            call()


def test_classical_epsilon_zero_is_invalid() -> None:
    with pytest.raises(InvalidBudgetError, match="epsilon must be > 0"):
        calibration.classical_gaussian_sigma(1.0, 0.0, 1e-6)


@pytest.mark.parametrize("bad", [*NOT_FINITE, -1.0, 0.0, -(10**400)])
def test_sensitivity_and_scale_validated(bad: object) -> None:
    checks = [
        ("l2_sensitivity", lambda: calibration.gaussian_sigma(bad, 0.5)),  # type: ignore[arg-type]
        ("rho", lambda: calibration.gaussian_sigma(1.0, bad)),  # type: ignore[arg-type]
        ("l2_sensitivity", lambda: calibration.gaussian_rho(bad, 1.0)),  # type: ignore[arg-type]
        ("sigma", lambda: calibration.gaussian_rho(1.0, bad)),  # type: ignore[arg-type]
        ("l2_sensitivity", lambda: calibration.analytic_gaussian_sigma(bad, 1.0, 1e-6)),  # type: ignore[arg-type]
        ("l2_sensitivity", lambda: calibration.classical_gaussian_sigma(bad, 0.5, 1e-6)),  # type: ignore[arg-type]
    ]
    for name, call in checks:
        with pytest.raises(InvalidBudgetError, match=name):
            call()


def test_calibration_out_of_float_range_is_a_calibration_error() -> None:
    with pytest.raises(CalibrationError, match="float range"):
        calibration.gaussian_sigma(1e300, 1e-300)
    with pytest.raises(CalibrationError, match="float range"):
        calibration.gaussian_rho(1e300, 1e-300)
    with pytest.raises(InvalidBudgetError, match="mu"):
        pf.GDP(1e300).to_zcdp()


@pytest.mark.parametrize("rho", [5e-324, 1e-300, 1e-20, 1e8, 1e100, 1e300])
@pytest.mark.parametrize("delta", [1e-300, 1e-10, 0.999999])
def test_extreme_inputs_give_valid_bounds_not_tracebacks(rho: float, delta: float) -> None:
    budget = pf.zCDP(rho)
    eps = budget.epsilon(delta)
    # 5e-324 is read as 5·10⁻³²⁴, a little more than the float: ρ rounds up, δ down.
    rho_up = numeric.round_up(numeric.exact("rho", rho))
    assert (
        0.0
        <= eps
        <= conversions.zcdp_epsilon_simple(rho_up, numeric.round_down(numeric.exact("d", delta)))
    )
    assert 0.0 <= budget.delta_at(eps) <= 1.0
    assert budget.to_gdp().epsilon(delta) >= 0.0
    inverse = pf.zCDP.from_approx_dp(min(eps, 1e6), delta)
    assert inverse.epsilon(delta) <= min(eps, 1e6)


# One validator for every number: numpy scalars in, wrong types out as
# InvalidArgumentError, bad values as InvalidBudgetError, always naming the parameter.

ENTRY_POINTS = [
    ("rho", lambda v: pf.zCDP(v)),
    ("delta", lambda v: pf.zCDP(0.5, delta=v)),
    ("epsilon", lambda v: pf.ApproxDP(v, 1e-6)),
    ("delta", lambda v: pf.ApproxDP(1.0, v)),
    ("mu", lambda v: pf.GDP(v)),
    ("delta", lambda v: pf.zCDP(0.5).epsilon(v)),
    ("epsilon", lambda v: pf.zCDP(0.5).delta_at(v)),
    ("delta", lambda v: pf.GDP(1.0).epsilon(v)),
    ("epsilon", lambda v: pf.GDP(1.0).delta(v)),
    ("epsilon", lambda v: pf.zCDP.from_approx_dp(v, 1e-6)),
    ("delta", lambda v: pf.zCDP.from_approx_dp(1.0, v)),
    ("l2_sensitivity", lambda v: calibration.gaussian_sigma(v, 0.5)),
    ("rho", lambda v: calibration.gaussian_sigma(1.0, v)),
    ("sigma", lambda v: calibration.gaussian_rho(1.0, v)),
    ("epsilon", lambda v: calibration.analytic_gaussian_sigma(1.0, v, 1e-6)),
    ("delta", lambda v: calibration.classical_gaussian_sigma(1.0, 0.5, v)),
]


@pytest.mark.parametrize("bad", ["0.1", None, True, np.bool_(False), complex(1, 0), [0.5]])
def test_wrong_types_are_argument_errors(bad: object) -> None:
    for name, call in ENTRY_POINTS:
        with pytest.raises(InvalidArgumentError, match=f"{name} must be a real number"):
            call(bad)
    with pytest.raises(TypeError):  # InvalidArgumentError is a TypeError ...
        pf.zCDP(bad)  # type: ignore[arg-type]
    with pytest.raises(pf.PrivframeError):  # ... and a PrivframeError
        pf.zCDP(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cast", [np.float64, np.float32, np.float16, np.longdouble, Fraction], ids=repr
)
def test_numpy_scalars_and_fractions_are_accepted(cast: Any) -> None:
    half, tiny = cast(0.5), cast(1e-3)  # 1e-3 in float32/16 is another float
    # A budget is read as written: a numpy float as its shortest decimal at its own
    # precision (float32(1e-3) is 0.001), a Fraction as itself.
    written = Fraction(str(tiny)) if cast not in (np.float64, Fraction) else Fraction(tiny)
    if cast is np.float64:
        written = Fraction("0.001")
    assert pf.zCDP(half, delta=tiny) == pf.zCDP(0.5, delta=written)
    assert type(pf.zCDP(half).rho) is float
    assert pf.ApproxDP(half, tiny) == pf.ApproxDP(0.5, written)
    assert pf.GDP(half) == pf.GDP(0.5)
    assert pf.zCDP(0.5).epsilon(tiny) == pf.zCDP(0.5).epsilon(written)
    assert pf.GDP(1.0).delta(half) == pf.GDP(1.0).delta(0.5)
    assert calibration.gaussian_sigma(half, half) == calibration.gaussian_sigma(0.5, 0.5)
    assert calibration.analytic_gaussian_sigma(
        half, half, tiny
    ) == calibration.analytic_gaussian_sigma(0.5, 0.5, float(tiny))


@pytest.mark.parametrize("cast", [int, np.int64, np.int32, np.uint8], ids=repr)
def test_integers_are_accepted(cast: Any) -> None:
    assert pf.zCDP(cast(2)) == pf.zCDP(2.0)
    assert calibration.gaussian_sigma(
        l2_sensitivity=cast(1), rho=cast(2)
    ) == calibration.gaussian_sigma(1.0, 2.0)
    assert calibration.gaussian_rho(cast(2), cast(4)) == 0.125
    assert pf.zCDP(cast(0)).rho == 0.0


def test_private_validators_for_other_modules() -> None:
    assert numeric.check_positive("sigma", np.float32(2.5)) == 2.5
    assert type(numeric.check_positive("sigma", np.int64(3))) is float
    assert numeric.check_conversion_delta(np.float64(1e-6)) == 1e-6
    assert numeric.check_real("shift", -2) == -2.0
    with pytest.raises(InvalidBudgetError, match="sigma must be > 0"):
        numeric.check_positive("sigma", np.float64(0.0))
    with pytest.raises(InvalidArgumentError, match="sigma"):
        numeric.check_positive("sigma", "1")
    with pytest.raises(InvalidBudgetError, match="delta must be in"):
        numeric.check_conversion_delta(np.float32(0.0))


def test_negative_zero_is_zero() -> None:
    assert math.copysign(1.0, pf.zCDP(-0.0).rho) == 1.0
    assert repr(pf.GDP(-0.0)) == "GDP(mu=0.0)"


@pytest.mark.parametrize(
    "inexact", [Fraction(1, 3), 2**53 + 1, -(2**60) - 1, np.int64(2**53 + 1), np.uint64(2**64 - 1)]
)
def test_values_that_no_float_represents_are_refused_not_rounded(inexact: object) -> None:
    with pytest.raises(InvalidBudgetError, match="not exactly a float"):
        numeric.check_real("rho", inexact)
    with pytest.raises(InvalidBudgetError, match="l2_sensitivity"):
        calibration.gaussian_sigma(inexact, 0.5)  # type: ignore[arg-type]


def test_numbers_beyond_the_float_range_are_budget_errors() -> None:
    for huge in (10**400, Fraction(10**400), -(10**400)):
        with pytest.raises(InvalidBudgetError, match="rho is beyond the float range"):
            pf.zCDP(huge)  # type: ignore[arg-type]
        with pytest.raises(InvalidBudgetError, match="sigma is beyond the float range"):
            calibration.gaussian_rho(1.0, huge)  # type: ignore[arg-type]


def test_sums_beyond_the_float_range_are_budget_errors() -> None:
    with pytest.raises(InvalidBudgetError, match=r"rho is beyond the float range"):
        pf.zCDP(1e308) + pf.zCDP(1e308)
    with pytest.raises(InvalidBudgetError, match=r"epsilon is beyond the float range"):
        pf.ApproxDP(1e308, 1e-6) + pf.ApproxDP(1e308, 1e-6)
    with pytest.raises(InvalidBudgetError, match="mu"):
        pf.GDP(1.5e308) + pf.GDP(1.5e308)
    top = pf.zCDP(math.nextafter(math.inf, 0.0))
    assert (top + pf.zCDP(0.0)) == top  # the largest float itself is fine


# ---------------------------------------------------------------------------
# Budget arithmetic and order, the same for the three types
# ---------------------------------------------------------------------------


def test_gdp_subtraction_inverts_composition_rounding_down() -> None:
    assert pf.GDP(5.0) - pf.GDP(4.0) == pf.GDP(3.0)
    assert pf.GDP(1.0) - pf.GDP(1.0) == pf.GDP(0.0)
    assert pf.GDP(2.0) - pf.GDP(0.0) == pf.GDP(2.0)
    for a, b in [(1.0, 0.3), (2.9, 1.7), (0.3, 0.1), (1e300, 1e299), (1e-300, 3e-301)]:
        left = (pf.GDP(a) - pf.GDP(b)).mu
        exact = numeric.exact("a", a) ** 2 - numeric.exact("b", b) ** 2
        assert Fraction(left) ** 2 <= exact  # an allowance: rounded down ...
        assert Fraction(math.nextafter(left, math.inf)) ** 2 > exact  # ... by less than an ulp
        assert (pf.GDP(b) + pf.GDP(left)).mu <= math.nextafter(a, math.inf)
    with pytest.raises(InvalidBudgetError, match="cannot subtract a larger mu"):
        pf.GDP(0.3) - pf.GDP(0.4)
    with pytest.raises(TypeError):
        pf.GDP(1.0) - pf.zCDP(0.1)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("small", "large", "incomparable"),
    [
        (pf.zCDP(0.1, 1e-9), pf.zCDP(0.2, 1e-9), pf.zCDP(0.05, 1e-8)),
        (pf.ApproxDP(0.5, 1e-9), pf.ApproxDP(1.0, 1e-8), pf.ApproxDP(2.0, 0.0)),
        (pf.GDP(0.5), pf.GDP(1.0), None),
    ],
    ids=["zCDP", "ApproxDP", "GDP"],
)
def test_budgets_are_partially_ordered(small: Any, large: Any, incomparable: Any) -> None:
    assert [small <= large, small < large, large >= small, large > small] == [True] * 4
    assert [large <= small, large < small, small >= large, small > large] == [False] * 4
    assert [small <= small, small >= small] == [True, True]
    assert [small < small, small > small] == [False, False]
    if incomparable is not None:  # bigger in one field, smaller in another
        for a, b in [(small, incomparable), (incomparable, small)]:
            assert [a <= b, a < b, a >= b, a > b] == [False] * 4
    other = pf.GDP(0.1) if not isinstance(small, pf.GDP) else pf.zCDP(0.1)
    for op in ("__lt__", "__le__", "__gt__", "__ge__"):
        assert getattr(small, op)(other) is NotImplemented
    with pytest.raises(TypeError):
        small < other  # noqa: B015
    with pytest.raises(TypeError):
        small <= 1.0  # noqa: B015


def test_subtracting_then_adding_back_never_exceeds_the_budget() -> None:
    for a, b in [(1 / 3, 1 / 7), (0.7, 1e-17), (0.3, 0.1)]:
        assert pf.zCDP(a) - pf.zCDP(b) + pf.zCDP(b) <= pf.zCDP(math.nextafter(a, math.inf))
        left = pf.ApproxDP(a, 1e-6) - pf.ApproxDP(b, 1e-7)
        assert left + pf.ApproxDP(b, 1e-7) <= pf.ApproxDP(math.nextafter(a, math.inf), 1.1e-6)
