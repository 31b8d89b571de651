"""Exact numbers for privacy math: conservative rounding, argument checks, exact budgets.

A bottom-layer module beside :mod:`privframe.errors`: the accounting,
mechanism, engine, plan and front-end layers share these helpers, and users
reach them through the budget types. scipy is imported lazily (its
submodules load on first use), so ``import privframe`` does not pay for it.
Rounding is always in the safe direction (a guarantee rounds up, an
allowance down); each transcendental evaluation carries an explicit guard.

Example:
    >>> from fractions import Fraction
    >>> from privframe.numeric import round_up
    >>> round_up(Fraction(1, 10)) == 0.1
    True
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import TypeAlias

import scipy

from privframe.errors import InvalidArgumentError, InvalidBudgetError, InvalidValueError

ULP = 2.0**-52
"""Relative spacing of doubles near 1 (machine epsilon)."""

GUARD = 8 * ULP
"""Relative error allowed per evaluated term of a transcendental formula."""

LOG_FLOOR = -1e4
"""Clamp for logs of probabilities that underflow; far below ln(min double)."""


# ---------------------------------------------------------------------------
# Exact rounding helpers
# ---------------------------------------------------------------------------


def round_up(x: Fraction) -> float:
    """Smallest float that is >= the exact rational ``x``: a guarantee stated as a float.

    Raises:
        OverflowError: ``x`` is beyond the float range.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.numeric import round_up
        >>> round_up(Fraction(1, 10)) == 0.1  # the float 0.1 is a little above 1/10
        True
    """
    f = float(x)
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def round_down(x: Fraction) -> float:
    """Largest float that is <= the exact rational ``x``: an allowance stated as a float.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.numeric import round_down
        >>> round_down(Fraction(1, 10)) < 0.1  # the float below 0.1
        True
    """
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def sqrt_up(x: Fraction) -> float:
    """Smallest float whose exact square is >= the rational ``x >= 0``.

    Raises:
        OverflowError: if that float does not exist.
    """
    if x == 0:
        return 0.0
    # Scale by an even power of two so the float square root is accurate to an
    # ulp even when x itself is outside the float range.
    half_exponent = (x.numerator.bit_length() - x.denominator.bit_length()) // 2
    scaled = x / Fraction(4) ** half_exponent
    root = math.ldexp(math.sqrt(float(scaled)), half_exponent)
    if math.isinf(root):
        raise OverflowError("square root exceeds the largest float")
    while root > 0 and Fraction(math.nextafter(root, 0.0)) ** 2 >= x:
        root = math.nextafter(root, 0.0)
    while Fraction(root) ** 2 < x:
        root = math.nextafter(root, math.inf)
        if math.isinf(root):
            raise OverflowError("square root exceeds the largest float")
    return root


def sqrt_down(x: Fraction) -> float:
    """Largest float whose exact square is <= the rational ``x >= 0``."""
    root = sqrt_up(x)
    return math.nextafter(root, 0.0) if Fraction(root) ** 2 > x else root


def up(value: float, error: float) -> float:
    """A float >= every real within ``error`` of the computed ``value``."""
    return math.nextafter(value + error, math.inf)


def down(value: float, error: float) -> float:
    """A float <= every real within ``error`` of the computed ``value``."""
    return math.nextafter(value - error, -math.inf)


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


def check_real(name: str, value: object) -> float:
    """``value`` as a finite float, or an error naming the parameter ``name``.

    Accepts every :class:`numbers.Real` except ``bool``: Python ints and floats,
    :class:`fractions.Fraction` and numpy scalars. A value that no double
    represents exactly (``Fraction(1, 3)``, ``10**17 + 1``) is refused rather
    than rounded, since rounding to nearest could go in the unsafe direction.
    ``-0.0`` becomes ``0.0``.

    Raises:
        InvalidArgumentError: ``value`` is not a real number (a str, None, a bool).
        InvalidBudgetError: ``value`` is NaN, infinite, beyond the float range or
            not exactly a float.

    Example:
        >>> import numpy as np
        >>> check_real("rho", np.float32(0.5))
        0.5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        v = float(value) + 0.0
    except OverflowError:
        raise InvalidBudgetError(
            f"{name} is beyond the float range (about 1.8e308); give a finite float"
        ) from None
    if not math.isfinite(v):
        raise InvalidBudgetError(f"{name} must be finite, got {v!r}")
    # Python ints compare with floats exactly; numpy integers would not.
    exact = int(value) if isinstance(value, numbers.Integral) else value
    if v != exact:
        raise InvalidBudgetError(
            f"{name}={value!r} is not exactly a float; round it yourself in the "
            f"direction that is safe for your use, e.g. {name}=float(...)"
        )
    return v


def check_nonnegative(name: str, value: object) -> float:
    """:func:`check_real`, and ``value >= 0``."""
    v = check_real(name, value)
    if v < 0:
        raise InvalidBudgetError(f"{name} must be >= 0, got {v!r}")
    return v


def check_positive(name: str, value: object) -> float:
    """:func:`check_real`, and ``value > 0``.

    The positive-real check of the whole package (:mod:`privframe.mechanisms.noise` uses
    it for σ): keep the signature ``(name, value) -> float``.
    """
    v = check_real(name, value)
    if v <= 0:
        raise InvalidBudgetError(f"{name} must be > 0, got {v!r}")
    return v


def check_probability(name: str, value: object) -> float:
    """``value`` as a float probability in [0, 1], or raise naming ``name``.

    Example:
        >>> check_probability("q", 0.5)
        0.5
    """
    q = check_nonnegative(name, value)
    if q > 1:
        raise InvalidValueError(f"{name} must be <= 1, got {q!r}")
    return q


def check_count(name: str, value: object) -> int:
    """``value`` as an int >= 0 (a bool is not a count), or raise naming ``name``.

    Example:
        >>> check_count("steps", 3)
        3
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"{name} must be an int, got {type(value).__name__}")
    count = int(value)
    if count < 0:
        raise InvalidValueError(f"{name} must be >= 0, got {count!r}")
    return count


def check_delta(value: object) -> float:
    """The δ of a budget: 0 <= δ < 1."""
    d = check_nonnegative("delta", value)
    if d >= 1:
        raise InvalidBudgetError(f"delta must be < 1, got {d!r}")
    return d


def check_conversion_delta(value: object) -> float:
    """δ for an (ε, δ) conversion: strictly inside (0, 1).

    Also the check of an accountant's reporting δ; keep the signature.
    """
    d = check_delta(value)
    if d == 0:
        raise InvalidBudgetError(
            "delta must be in (0, 1) for an (epsilon, delta) conversion, got 0.0; "
            "zCDP and GDP imply pure epsilon-DP for no finite epsilon"
        )
    return d


def sum_up(name: str, a: float, b: float) -> float:
    """``a + b`` rounded up; a sum beyond the float range is a budget error."""
    try:
        return round_up(Fraction(a) + Fraction(b))
    except OverflowError:
        raise InvalidBudgetError(
            f"composed {name} of {a!r} and {b!r} exceeds the float range"
        ) from None


# ---------------------------------------------------------------------------
# Exact budget parameters
# ---------------------------------------------------------------------------

Number: TypeAlias = int | float | Fraction | Decimal
"""A number a user may give as a budget parameter; numpy scalars are accepted too."""

FLOAT_MAX = Fraction(sys.float_info.max)


def exact(name: str, value: object, *, positive: bool = False) -> Fraction:
    """A budget parameter as the exact rational the user wrote; >= 0 (> 0 if ``positive``).

    A float is read as the shortest decimal that rounds to it (its ``repr``):
    ``0.1`` is 1/10, not the binary double nearest to it, because 0.1 is
    what the user typed. A numpy float of another precision (``float32``) is
    read the same way at its own precision. Ints, :class:`~fractions.Fraction`
    and :class:`~decimal.Decimal` are exact as they are. privframe passes the
    values it computes as ``Fraction(x)``, which keeps their binary value.

    Args:
        name: the parameter's name, for error messages.
        value: the number.
        positive: refuse 0 as well as negative values.

    Raises:
        InvalidArgumentError: ``value`` is not a real number (a str, None, a bool).
        InvalidBudgetError: ``value`` is NaN, infinite, negative (or 0 with
            ``positive``), or beyond the float range (about 1.8e308).

    Example:
        >>> from fractions import Fraction
        >>> from decimal import Decimal
        >>> from privframe.numeric import exact
        >>> exact("rho", 0.1), exact("rho", Decimal("0.25")), exact("rho", Fraction(1, 3))
        (Fraction(1, 10), Fraction(1, 4), Fraction(1, 3))
        >>> exact("rho", Fraction(0.1)) == Fraction(0.1)  # a binary value, kept as is
        True
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        raise InvalidArgumentError(f"{name} must be a real number, got {type(value).__name__}")
    if isinstance(value, Decimal):
        finite = value.is_finite()
    else:
        finite = not isinstance(value, float) or math.isfinite(value)
    if not finite:
        raise InvalidBudgetError(f"{name} must be finite, got {value!r}")
    if isinstance(value, numbers.Rational):
        x = Fraction(int(value.numerator), int(value.denominator))
    elif isinstance(value, float):
        x = Fraction(float.__repr__(value))  # np.float64 is a float; its repr is decorated
    elif isinstance(value, Decimal):
        x = Fraction(value)
    else:
        # Other reals (numpy float32/float16/longdouble): their str is the shortest
        # decimal at their own precision.
        text = str(value)
        try:
            x = Fraction(text)
        except ValueError:
            problem = "must be finite" if text.lower().lstrip("+-") in ("nan", "inf") else None
            if problem is None:
                raise InvalidArgumentError(
                    f"{name}={value!r} cannot be read exactly; give a float, int, "
                    "fractions.Fraction or decimal.Decimal"
                ) from None
            raise InvalidBudgetError(f"{name} {problem}, got {text}") from None
    if abs(x) > FLOAT_MAX:
        raise InvalidBudgetError(
            f"{name} is beyond the float range (about 1.8e308); give a smaller value"
        )
    if x < 0 or (positive and x == 0):
        raise InvalidBudgetError(f"{name} must be {'>' if positive else '>='} 0, got {value!r}")
    return x


def exact_delta(value: object) -> Fraction:
    """The δ of a budget, exactly: 0 <= δ < 1."""
    d = exact("delta", value)
    if d >= 1:
        raise InvalidBudgetError(f"delta must be < 1, got {value!r}")
    return d


def exact_conversion_delta(value: object) -> Fraction:
    """δ for an (ε, δ) statement, exactly: strictly inside (0, 1)."""
    d = exact_delta(value)
    if d == 0:
        raise InvalidBudgetError(
            "delta must be in (0, 1) for an (epsilon, delta) conversion, got 0; "
            "zCDP and GDP imply pure epsilon-DP for no finite epsilon"
        )
    return d


def literal(name: str, x: Fraction) -> str:
    """``name=value`` for a repr: the exact short decimal, else ``name≈`` six digits.

    ``0.9``, ``1e-06`` and ``1.0`` are shown as typed and read back as the
    same exact value (floats are read as their decimal). A value no short
    decimal is (1/3, a converted budget's binary ρ) is shown rounded, marked
    ``≈`` so it is not mistaken for the exact value (``exact_*`` holds that).
    """
    shown = decimal(x)
    return f"{name}={shown}" if shown else f"{name}≈{float(x):.6g}"


def decimal(x: Fraction) -> str | None:
    """The shortest float repr that is exactly ``x``, or None if none is."""
    shown = repr(float(x))
    return shown if Fraction(shown) == x else None


def conversion_slack(total: float, reserved: float) -> float:
    """The δ left for a ρ → (ε, δ) conversion when ``reserved`` of ``total`` is spent outright.

    The largest float ``s`` with ``s + reserved <= total`` exactly (``total -
    reserved`` rounded down), for floats ``0 <= reserved < total``. It is the
    one rule by which privframe splits a total δ: :meth:`zCDP.epsilon` converts
    ρ at ``conversion_slack(delta, δ₀)`` and :meth:`ApproxDP.to_zcdp` sizes ρ
    at it. It round-trips exactly: with ``t = round_up(Fraction(s) +
    Fraction(reserved))`` (the total an accountant states), ``t <= total`` and
    ``conversion_slack(t, reserved) == s``, because ``t - reserved`` lies in
    ``[s, total - reserved]`` and ``s`` is the largest float at or below its top.

    Example:
        >>> conversion_slack(1e-6, 1e-7)
        9e-07
        >>> conversion_slack(1e-6, 0.0)
        1e-06
    """
    return round_down(Fraction(total) - Fraction(reserved))


def solve(func: Callable[[float], float], lo: float, hi: float) -> float | None:
    """Root of an increasing ``func`` bracketed by ``func(lo) < 0 < func(hi)``.

    Returns ``None`` when the bracket is not valid in floating point or the
    solver fails; callers then fall back to a bound that is trivially valid.
    """
    try:
        return float(scipy.optimize.brentq(func, lo, hi, xtol=1e-15, rtol=4 * ULP, maxiter=500))
    except (ValueError, RuntimeError, OverflowError, ZeroDivisionError):
        return None


def log1p_exp(t: float) -> float:
    """ln(1 + e^t) without overflow."""
    return t + math.log1p(math.exp(-t)) if t > 0 else math.log1p(math.exp(t))
