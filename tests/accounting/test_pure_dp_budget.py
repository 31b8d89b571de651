"""The PureDP budget: an exact ε value type with the arithmetic, order and errors of the others."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import privframe as pf
from privframe.accounting.budgets import to_zcdp
from privframe.errors import InvalidArgumentError, InvalidBudgetError

SECRET = 0.123456789  # stands for a value no message may repeat


def test_pure_dp_is_exported_where_budgets_are() -> None:
    assert pf.PureDP is pf.accounting.PureDP
    assert "PureDP" in pf.__all__
    assert "PureDP" in pf.accounting.__all__
    assert isinstance(pf.PureDP(1.0), pf.Budget)


def test_ten_tenths_make_one_exactly() -> None:
    total = pf.PureDP(0)
    for _ in range(10):
        total = total + pf.PureDP(0.1)
    assert total == pf.PureDP(1)
    assert total.exact_epsilon == 1
    assert pf.PureDP(1.0) - total == pf.PureDP(0)
    assert pf.PureDP(0.3) - pf.PureDP(0.1) - pf.PureDP(0.1) - pf.PureDP(0.1) == pf.PureDP(0)


@pytest.mark.parametrize(
    "cast", [float, Fraction, Decimal, int, np.float64, np.int64], ids=lambda c: c.__name__
)
def test_numbers_of_every_kind_are_read_exactly(cast: Any) -> None:
    value = cast(2) if cast in (int, np.int64) else cast("0.25") if cast is Decimal else cast(0.25)
    expected = Fraction(2) if cast in (int, np.int64) else Fraction(1, 4)
    assert pf.PureDP(value).exact_epsilon == expected


def test_repr_is_the_literal_style_of_the_other_budgets() -> None:
    assert repr(pf.PureDP(0.5)) == "PureDP(epsilon=0.5)"
    assert repr(pf.PureDP(epsilon=1)) == "PureDP(epsilon=1.0)"
    assert repr(pf.PureDP(Fraction(1, 3))) == "PureDP(epsilon≈0.333333)"
    assert pf.PureDP(0.1).epsilon == 0.1


def test_going_below_zero_is_refused() -> None:
    with pytest.raises(InvalidBudgetError, match="cannot subtract a larger epsilon"):
        pf.PureDP(0.1) - pf.PureDP(0.2)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, -math.inf])
def test_malformed_epsilon_is_a_budget_error(bad: float) -> None:
    with pytest.raises(InvalidBudgetError):
        pf.PureDP(bad)


@pytest.mark.parametrize("bad", ["0.5", None, True, [0.5]])
def test_wrong_types_are_argument_errors(bad: object) -> None:
    with pytest.raises(InvalidArgumentError):
        pf.PureDP(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: pf.PureDP(rho=SECRET), ["'rho'", "pf.zCDP(rho=", "missing the argument"]),
        (lambda: pf.PureDP(SECRET, delta=SECRET), ["'delta'", "pf.ApproxDP(epsilon="]),
        (lambda: pf.PureDP(mu=SECRET), ["'mu'", "pf.GDP(mu=...)"]),
        (lambda: pf.PureDP(eps=SECRET), ["did you mean epsilon=...?"]),
        (lambda: pf.zCDP(epsilon=SECRET), ["pf.PureDP(epsilon=...)", "pf.ApproxDP(epsilon="]),
    ],
)
def test_a_wrong_keyword_names_the_budget_that_takes_it(build: Any, says: list) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        build()
    message = str(caught.value)
    for part in says:
        assert part in message
    assert "0.123" not in message
    assert caught.value.__context__ is None


def test_partial_order_within_the_type_only() -> None:
    small, large = pf.PureDP(0.1), pf.PureDP(0.2)
    assert [small <= large, small < large, large >= small, large > small] == [True] * 4
    assert [large <= small, small < small] == [False, False]
    assert small.__le__(pf.ApproxDP(0.2)) is NotImplemented
    with pytest.raises(TypeError):
        small < pf.ApproxDP(0.2)  # noqa: B015
    with pytest.raises(TypeError):
        small + pf.ApproxDP(0.2)  # type: ignore[operator]


def test_conversions_are_exact_and_cited_ones() -> None:
    # Bun & Steinke 2016, Prop. 1.4: ε-DP implies (ε²/2)-zCDP.
    assert pf.PureDP(0.5).implied_zcdp() == pf.zCDP(Fraction(1, 8))
    assert pf.PureDP(Fraction(1, 3)).implied_zcdp().exact_rho == Fraction(1, 18)
    assert pf.PureDP(0.5).to_approx_dp() == pf.ApproxDP(0.5, 0.0)
    with pytest.raises(InvalidBudgetError, match="float range"):
        pf.PureDP(1e300).implied_zcdp()


def test_a_pure_budget_has_no_zcdp_allowance() -> None:
    # rho-zCDP does not imply epsilon-DP: spending epsilon**2/2 as zCDP would overspend.
    with pytest.raises(InvalidBudgetError, match="no zCDP allowance"):
        to_zcdp(pf.PureDP(1.0))
    assert not hasattr(pf.PureDP(1.0), "to_zcdp")


def test_values_are_frozen_and_hashable() -> None:
    budget = pf.PureDP(0.5)
    with pytest.raises(AttributeError):
        budget.exact_epsilon = Fraction(1)  # type: ignore[misc]
    assert len({pf.PureDP(0.5), pf.PureDP(Fraction(1, 2)), pf.PureDP(0.25)}) == 2
