"""Bounds nobody has to guess: a release that chooses its aggregates' bounds privately.

An aggregate built with ``bounds="auto"`` (``pf.sum("x", bounds="auto")``, or
``per_unit_bounds="auto"`` for BigQuery's per-unit clamping) has no public
bounds. Its release spends a stated share ``s`` of its budget ρ (default
:data:`DEFAULT_SHARE`, or ``Query.bounds_share``) choosing them, as BigQuery
does when a query gives no ``contribution_bounds_per_group``, then releases the
query with the chosen bounds at ``ρ − s·ρ``. Both are charged: the bounds as a
ledger entry of their own, labelled ``"<label>: bounds"``, the release as usual,
its description naming the bounds chosen (``"auto_bounds"``).

**The measurement** is ``query.tune``'s values histogram
(:mod:`privframe.plan.tuning`), one per column whose bounds are chosen: signed
half-octave buckets of the column's values over the rows the release
aggregates (after its steps, e.g. the per-unit stage), each unit weighing
``W`` in all, so the L2 sensitivity is ``W``; the discrete Gaussian at
``s·ρ/n`` each over ``n`` columns is ``s·ρ``-zCDP (Canonne, Kamath & Steinke
2020; Bun & Steinke 2016, Lemma 2.3). The release at ``ρ − s·ρ`` is planned
with the chosen bounds exactly as with given ones, so the whole is ρ-zCDP.

**The rule** starts from Google's ApproxBounds (differential-privacy
library, "Approx Bounds"): the bounds are the outer edges of the most extreme
buckets whose noisy weight reaches tune's threshold τ (some empty bucket
passes with probability at most 1e-6), so the values clipped are those in the
outer buckets too thin to show above the noise (each with fewer than about τ
units: more of them at a smaller share). When the values that show have one
sign, the bound nearest zero is 0 (:func:`candidate_bounds`). With public
groups (their number known), ``tune``'s error model then moves the other
bounds to the least estimated error of the release at the rest of ρ, reading
the raw buckets just beyond the support that show mass
(:func:`~privframe.plan.tuning_choice.choose_bounds`): on a heavy tail,
ApproxBounds clips the sparse top buckets, each below τ, that together hold
enough of the sum to matter. With groups chosen privately ApproxBounds'
bounds stand. If the chosen bounds need more noise than the sampler can
draw, the model's choice is dropped and ApproxBounds' side of larger
magnitude moves in one bucket at a time until the release can be planned.
All of this is post-processing of the noisy histogram.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> df = pl.DataFrame({"u": list(range(2000)), "x": [float(i % 50) for i in range(2000)]})
    >>> sess = pf.Session(df, "u", pf.zCDP(10.0))
    >>> q = sess.query().bound(max_rows_per_group=1).bounds_share(0.2).agg(
    ...     pf.sum("x", bounds="auto"))
    >>> out = q.release(rho=5.0, label="x")
    >>> [(e.label, round(e.cost.rho, 3)) for e in sess.ledger]
    [('x: bounds', 1.0), ('x', 4.0)]
    >>> sess.ledger[-1].description["auto_bounds"]["chosen"]["x_sum"][1] >= 49
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from fractions import Fraction

import numpy as np

from privframe.accounting.budgets import zCDP
from privframe.errors import InvalidBudgetError, InvalidValueError
from privframe.numeric import exact
from privframe.plan.aggregates import Bounded
from privframe.plan.explanation import Explanation
from privframe.plan.ir import Plan
from privframe.plan.planner import selects
from privframe.plan.split import Balance
from privframe.plan.tuning import Estimates, Histogram, TuningDesign, measuring, values_of
from privframe.plan.tuning_choice import choose_bounds

__all__ = [
    "DEFAULT_SHARE",
    "asks",
    "candidate_bounds",
    "check_share",
    "columns",
    "design",
    "explain_note",
    "explained",
    "not_zcdp",
    "resolve",
    "share_of",
    "split",
]

DEFAULT_SHARE = Fraction(1, 10)
"""The share of a release's budget that chooses its bounds when the query states none."""


def asks(plan: Plan) -> bool:
    """Whether some aggregate of ``plan`` has its bounds chosen at release.

    Example:
        >>> import privframe as pf
        >>> asks(Plan(aggregates=(pf.sum("x", bounds="auto"),)))
        True
    """
    return any(isinstance(a, Bounded) and a.auto for a in plan.aggregates)


def columns(plan: Plan) -> tuple[str, ...]:
    """The columns whose values are measured: those of the aggregates with ``auto`` bounds."""
    return tuple(
        dict.fromkeys(a.column for a in plan.aggregates if isinstance(a, Bounded) and a.auto)
    )


def check_share(share: object) -> Fraction:
    """A bounds share as an exact rational strictly between 0 and 1.

    Raises:
        InvalidArgumentError: not a real number.
        InvalidBudgetError: NaN, infinite, or outside (0, 1).

    Example:
        >>> check_share(0.25)
        Fraction(1, 4)
        >>> check_share(-0.1)
        Traceback (most recent call last):
        ...
        privframe.errors.InvalidBudgetError: bounds_share must be a number in (0, 1): the share \
of each release's budget spent choosing its bounds, got -0.1
    """
    why = "the share of each release's budget spent choosing its bounds"
    try:
        value = exact("bounds_share", share, positive=True)
    except InvalidBudgetError:
        value = None
    if value is None or not value < 1:
        raise InvalidBudgetError(f"bounds_share must be a number in (0, 1): {why}, got {share!r}")
    return value


def share_of(plan: Plan) -> Fraction:
    """The share of the release's budget that chooses ``plan``'s bounds."""
    return DEFAULT_SHARE if plan.bounds_share is None else plan.bounds_share


def split(plan: Plan, rho: Fraction) -> tuple[Fraction, Fraction]:
    """``rho`` as (the bounds' share, the release's rest), exactly.

    Example:
        >>> import privframe as pf
        >>> split(Plan(aggregates=(pf.sum("x", bounds="auto"),)), Fraction(1))
        (Fraction(1, 10), Fraction(9, 10))
    """
    bounds = rho * share_of(plan)
    return bounds, rho - bounds


def design(plan: Plan, has_unit: bool, rho: Fraction) -> TuningDesign:
    """The values histograms that choose ``plan``'s bounds, ``rho/n`` each: no data.

    Raises:
        InvalidBudgetError: ``rho`` is so small that the noise cannot be drawn.

    Example:
        >>> import privframe as pf
        >>> d = design(Plan(aggregates=(pf.mean("x", bounds="auto"),)), True, Fraction(1, 10))
        >>> [(p.name, p.l2_units, float(p.rho)) for p in d.pieces]
        [('values of x', 65536, 0.1)]
    """
    wanted = [values_of(column) for column in columns(plan)]
    fix = "give the release more rho, a larger bounds_share, or bounds"
    return measuring(wanted, rho, plan.n_groups or 1, has_unit, "choose bounds", fix)


def candidate_bounds(h: Histogram) -> tuple[list[float], list[float]] | None:
    """Candidate lower and upper bounds, outermost first, from a thresholded values histogram.

    ApproxBounds' rule: the outer edges of the buckets that pass the
    threshold, the first of each list the most extreme. When every value that
    shows has one sign, the bound nearest zero is 0: the buckets near zero are
    each too thin to show above the noise, but together they may hold much
    of the data, which a bucket edge there would clip away from zero. None
    when no bucket passes.

    Example:
        >>> import numpy as np
        >>> import privframe as pf
        >>> from privframe.plan.tuning import SCALE, read
        >>> d = design(Plan(aggregates=(pf.sum("x", bounds="auto"),)), True, Fraction(10**6))
        >>> raw = np.zeros(d.pieces[0].bins)
        >>> zero = len(raw) // 2  # the bucket of |x| < 2**-20; zero + i: the i-th magnitude bin
        >>> raw[zero + 41] = raw[zero + 47] = 500 * SCALE  # values in [1, 1.41), [8, 11.3)
        >>> lowers, uppers = candidate_bounds(read(d, {"values of x": raw}).values["x"])
        >>> lowers, [round(u, 2) for u in uppers]
        ([0.0], [11.31, 1.41])
        >>> raw[zero - 46] = 500 * SCALE  # and values in (-8, -5.66]
        >>> lowers, uppers = candidate_bounds(read(d, {"values of x": raw}).values["x"])
        >>> lowers[0], round(uppers[0], 2)
        (-8.0, 11.31)
    """
    passed = np.flatnonzero(h.weight)
    if not passed.size:
        return None
    lowers = [float(h.low[i]) for i in passed]
    uppers = [float(h.high[i]) for i in passed[::-1]]
    zero = len(h.weight) // 2  # the middle bucket: |x| below the smallest magnitude edge
    if passed[0] >= zero and passed[-1] > zero:
        lowers = [0.0]
    elif passed[-1] <= zero and passed[0] < zero:
        uppers = [0.0]
    return lowers, uppers


def resolve(
    plan: Plan,
    estimates: Estimates,
    plannable: Callable[[Plan], bool],
    rest: Fraction,
    weights: Mapping[str, float] | Balance | None,
) -> tuple[Plan, dict[str, tuple[float, float]]]:
    """``plan`` with each ``auto`` aggregate's bounds chosen, and the bounds by output name.

    ``plannable`` says whether a plan can be released at the rest of the
    budget, ``rest`` (with ``weights``). With public groups the bounds are
    :func:`~privframe.plan.tuning_choice.choose_bounds`' (``tune``'s error
    model, from ApproxBounds' bounds) when they can be planned; otherwise,
    and with groups chosen privately (their number is not public, which the
    model needs), ApproxBounds' own, the side of larger magnitude moving
    inwards until they can be planned. Post-processing of ``estimates``.

    Raises:
        InvalidValueError: some column shows no bucket above the noise (too
            few units for this share of the budget), or no bounds can be
            planned; the bounds' share has been spent.
    """
    edges = {column: _candidates(plan, column, estimates) for column in columns(plan)}
    if not selects(plan):
        start = {column: (lowers[0], uppers[0]) for column, (lowers, uppers) in edges.items()}
        model = choose_bounds(plan, estimates, rest, weights, start)
        if model != start and plannable(_with_bounds(plan, model)):
            return _resolved(plan, model)
    chosen: dict[str, tuple[float, float]] = {}
    for column, (lowers, uppers) in edges.items():
        while not plannable(_with_bounds(plan, {**chosen, column: (lowers[0], uppers[0])})):
            side = lowers if abs(lowers[0]) > abs(uppers[0]) else uppers
            if len(side) == 1 or not _inward(lowers, uppers, side):
                raise InvalidValueError(
                    f"no bounds for {_outputs(plan, column)} from the noisy histogram can be "
                    "released at this rho (the bounds' share of the budget was spent): give "
                    "bounds or more rho"
                )
            side.pop(0)
        chosen[column] = (lowers[0], uppers[0])
    return _resolved(plan, chosen)


def _outputs(plan: Plan, column: str) -> str:
    """The outputs whose bounds of ``column`` are chosen at release, for a message."""
    return ", ".join(
        a.output_name
        for a in plan.aggregates
        if isinstance(a, Bounded) and a.auto and a.column == column
    )


def _candidates(plan: Plan, column: str, estimates: Estimates) -> tuple[list[float], list[float]]:
    """ApproxBounds' candidate bounds of ``column``; refused when no bucket shows.

    Raises:
        InvalidValueError: the column's histogram shows nothing above its noise.
    """
    edges = candidate_bounds(estimates.values[column])
    if edges is None:
        raise InvalidValueError(
            f"the noisy histogram of the values of {_outputs(plan, column)} shows nothing above "
            "its noise, so no bounds could be chosen (the bounds' share of the budget was "
            "spent): give bounds, a larger bounds_share or more rho"
        )
    return edges


def _resolved(
    plan: Plan, chosen: Mapping[str, tuple[float, float]]
) -> tuple[Plan, dict[str, tuple[float, float]]]:
    """``plan`` with the ``chosen`` bounds per column, and the bounds by output name."""
    named = {
        a.output_name: chosen[a.column]
        for a in plan.aggregates
        if isinstance(a, Bounded) and a.auto
    }
    return _with_bounds(plan, chosen), named


def _inward(lowers: list[float], uppers: list[float], side: list[float]) -> bool:
    """Whether moving ``side`` in by one bucket still leaves lower < upper."""
    return lowers[1] < uppers[0] if side is lowers else lowers[0] < uppers[1]


def _with_bounds(plan: Plan, given: Mapping[str, tuple[float, float]]) -> Plan:
    """``plan`` with the ``auto`` aggregates of these columns given these bounds."""
    aggregates = tuple(
        dataclasses.replace(a, lower=given[a.column][0], upper=given[a.column][1], auto=False)
        if isinstance(a, Bounded) and a.auto and a.column in given
        else a
        for a in plan.aggregates
    )
    return dataclasses.replace(plan, aggregates=aggregates)


def not_zcdp(budget: object) -> InvalidValueError:
    """The refusal of automatic bounds in a session whose budget is not zCDP."""
    return InvalidValueError(
        'automatic bounds (bounds="auto", or a SQL privacy clause\'s SUM, AVG or COUNT with '
        "no bounds) measure a histogram with Gaussian noise and spend rho, and this "
        f"session's budget is {budget!r}: give the bounds"
    )


def explained(
    plan: Plan, rho: Fraction, explain_rest: Callable[[Fraction], Explanation]
) -> Explanation:
    """``explain`` of ``plan`` at ``rho``: the release at the rest (stand-in bounds), and a note.

    ``explain_rest`` explains the plan at a ρ as its session would.
    """
    bounds, rest = split(plan, rho)
    explanation = explain_rest(rest)
    return dataclasses.replace(
        explanation,
        notes=(*explanation.notes, explain_note(plan, rho)),
        bounds_cost=zCDP(bounds),
    )


def explain_note(plan: Plan, rho: Fraction) -> str:
    """What ``explain`` says of the bounds a release of ``plan`` at ``rho`` chooses.

    Example:
        >>> import privframe as pf
        >>> print(explain_note(Plan(aggregates=(pf.sum("x", bounds="auto"),)), Fraction(1)))
        automatic bounds: x_sum's bounds are chosen at release from a noisy histogram of x \
(share 1/10 of the budget: rho = 0.1, each unit weighing 1 in all, from Google's ApproxBounds \
rule: the outermost half-octave buckets above the noise, tune's error model moves them to its \
least estimated error); the release above spends the rest, rho = 0.9, \
and its numbers take bounds (0, 1) as a stand-in: its noise scales with the chosen bounds, \
which the ledger entry records
    """
    bounds, rest = split(plan, rho)
    names = ", ".join(
        f"{a.output_name}'s" for a in plan.aggregates if isinstance(a, Bounded) and a.auto
    )
    measured = ", ".join(columns(plan))
    share = share_of(plan)
    rule = "Google's ApproxBounds rule: the outermost half-octave buckets above the noise"
    if not selects(plan):
        rule = f"from {rule}, tune's error model moves them to its least estimated error"
    return (
        f"automatic bounds: {names} bounds are chosen at release from a noisy histogram of "
        f"{measured} (share {share} of the budget: rho = {float(bounds):.6g}, each unit "
        f"weighing 1 in all, {rule}); "
        f"the release above spends the rest, rho = {float(rest):.6g}, and its numbers take "
        "bounds (0, 1) as a stand-in: its noise scales with the chosen bounds, which the ledger "
        "entry records"
    )
