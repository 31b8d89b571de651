"""DP-SGD accounting: ε of a training run, and the noise multiplier for a target ε.

DP-SGD (Abadi et al. 2016, "Deep Learning with Differential Privacy") runs
``steps`` Poisson-subsampled Gaussian mechanisms: each step keeps every
example with probability q, clips each kept example's gradient to L2 norm C
and adds N(0, (zC)²) to their sum (:func:`privframe.mechanisms.noise.clipped_gaussian_sum`
is that step, with secure noise). The whole run is the event
``SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(z)), steps)``,
accounted here by Rényi DP (:class:`privframe.accounting.rdp.RDPAccountant`, as Opacus
and TensorFlow Privacy do) or by privacy loss distributions
(:class:`privframe.accounting.pld.PLDAccountant`, tighter).

Example:
    >>> round(dpsgd_epsilon(1.1, 0.01, 1000, 1e-5), 4)
    1.7118
    >>> dpsgd_epsilon(1.1, 0.01, 1000, 1e-5, method="pld") < 1.55
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from privframe.accounting._pld_grid import GridTooLargeError
from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
from privframe.accounting.pld import PLDAccountant
from privframe.accounting.rdp import RDPAccountant
from privframe.errors import CalibrationError, InvalidValueError
from privframe.numeric import (
    check_conversion_delta,
    check_count,
    check_positive,
    check_probability,
)

__all__ = ["dpsgd_epsilon", "dpsgd_noise_multiplier"]

_METHODS = ("rdp", "pld")


def _accountant(method: str) -> RDPAccountant | PLDAccountant:
    if method == "rdp":
        return RDPAccountant()
    if method == "pld":
        return PLDAccountant()
    raise InvalidValueError(f"method must be one of {_METHODS}, got {method!r}")


def dpsgd_epsilon(
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    *,
    method: str = "rdp",
    discrete: bool = False,
) -> float:
    """ε of DP-SGD: ``steps`` Poisson-subsampled Gaussian steps, at δ.

    Args:
        noise_multiplier: z = σ/C, the noise over the clipping norm, > 0.
        sample_rate: the Poisson sampling probability q in [0, 1].
        steps: the number of steps, an int >= 0.
        delta: 0 < δ < 1.
        method: ``"rdp"`` (default; dp_accounting's and Opacus' RDP) or
            ``"pld"`` (pessimistic PLD, grid 1e-4).
        discrete: True for discrete Gaussian noise, as
            :func:`privframe.mechanisms.noise.clipped_gaussian_sum` adds: accounted by Zhu &
            Wang 2019's general subsampled-RDP bound (both methods), the
            analyses of continuous noise not being proven for it.

    Example:
        >>> round(dpsgd_epsilon(1.1, 0.01, 10000, 1e-5), 4)
        5.632
        >>> dpsgd_epsilon(1.1, 0.01, 10000, 1e-5, discrete=True) > 5.632
        True
    """
    event = PoissonSampledEvent(sample_rate, GaussianEvent(noise_multiplier, discrete=discrete))
    return _accountant(method).compose(event, steps).epsilon(delta)


def dpsgd_noise_multiplier(
    target_epsilon: float,
    delta: float,
    sample_rate: float,
    steps: int,
    *,
    method: str = "rdp",
    discrete: bool = False,
    rtol: float = 1e-6,
) -> float:
    """The smallest noise multiplier (to ``rtol``) whose DP-SGD ε is within a target.

    A bracketing search on z (ε decreases as z grows); the value returned is one for
    which :func:`dpsgd_epsilon` was evaluated and is <= ``target_epsilon``, and
    a multiplier ``rtol`` relatively smaller missed the target.

    Args:
        target_epsilon: ε > 0.
        delta: 0 < δ < 1.
        sample_rate: q in (0, 1].
        steps: an int >= 1.
        method: ``"rdp"`` or ``"pld"``, as for :func:`dpsgd_epsilon`. With
            ``"pld"``, a z so small that its losses outgrow the PLD grid (ε in
            the hundreds) is evaluated by RDP instead, also a valid bound.
        discrete: True for discrete Gaussian noise, as for :func:`dpsgd_epsilon`.
        rtol: relative width of the final bracket, in (0, 0.5].

    Raises:
        CalibrationError: no z up to 2^40 meets the target.

    Example:
        >>> z = dpsgd_noise_multiplier(2.0, 1e-5, 0.01, 1000)
        >>> dpsgd_epsilon(z, 0.01, 1000, 1e-5) <= 2.0
        True
        >>> round(z, 3)
        1.022
    """
    target = check_positive("target_epsilon", target_epsilon)
    delta = check_conversion_delta(delta)
    q = check_probability("sample_rate", sample_rate)
    if q == 0:
        raise InvalidValueError("sample_rate must be > 0: with q = 0 no noise is needed")
    steps = check_count("steps", steps)
    if steps == 0:
        raise InvalidValueError("steps must be >= 1: zero steps need no noise")
    rtol = check_positive("rtol", rtol)
    if rtol > 0.5:
        raise InvalidValueError(f"rtol must be <= 0.5, got {rtol!r}")
    _accountant(method)

    # Cached: the bracket's ends are evaluated while bracketing and again by the search.
    @functools.cache
    def epsilon(z: float) -> float:
        try:
            return dpsgd_epsilon(z, q, steps, delta, method=method, discrete=discrete)
        except GridTooLargeError:
            # So little noise that the loss range outgrows the PLD grid (ε in the
            # hundreds): the RDP bound, also valid, stands in for it.
            return dpsgd_epsilon(z, q, steps, delta, method="rdp", discrete=discrete)

    lo, hi = _bracket(epsilon, target, delta)
    if lo < 2.0**-20:
        return hi
    return _illinois(epsilon, target, lo, hi, rtol)


def _bracket(epsilon: Callable[[float], float], target: float, delta: float) -> tuple[float, float]:
    """Powers of two ``lo = hi / 2`` with ε(lo) > target >= ε(hi).

    Doubling from z = 1 until the target is met, then halving while it still
    is; a ``lo`` below 2^-20 means ``hi`` is small enough and ε(lo) is not evaluated.
    """
    hi = 1.0
    while epsilon(hi) > target:
        hi *= 2
        if hi > 2.0**40:
            raise CalibrationError(
                f"no noise multiplier up to 2^40 gives epsilon <= {target!r} at delta={delta!r}"
            )
    lo = hi / 2
    while epsilon(lo) <= target:
        hi, lo = lo, lo / 2
        if lo < 2.0**-20:
            break
    return lo, hi


def _illinois(
    epsilon: Callable[[float], float], target: float, lo: float, hi: float, rtol: float
) -> float:
    """The z in [lo, hi] where ε crosses ``target``, to ``rtol``: the bracket's upper end.

    Illinois regula falsi on ε(z) − target: the bracket [lo, hi] always has
    ε(lo) > target >= ε(hi), and shrinks superlinearly (fewer accountant runs
    than bisection; each PLD run costs a few tenths of a second).
    """
    f_lo, f_hi = epsilon(lo) - target, epsilon(hi) - target
    side = 0
    while hi - lo > rtol * hi:
        mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        width = hi - lo
        mid = min(max(mid, lo + 0.01 * width), hi - 0.01 * width)
        f_mid = epsilon(mid) - target
        if f_mid <= 0:
            hi, f_hi = mid, f_mid
            if side == -1:
                f_lo /= 2
            side = -1
        else:
            lo, f_lo = mid, f_mid
            if side == 1:
                f_hi /= 2
            side = 1
    return hi
