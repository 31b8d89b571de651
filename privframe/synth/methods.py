"""MST and AIM: which marginals to measure, at what cost, and the model they estimate.

Both spend a budget (ρ in a zCDP session, ε in a pure-DP one: either adds up
over the steps) through a :class:`Measurements` door (noisy marginals and
exponential-mechanism choices, each at a stated exact cost) and estimate a
graphical model from what they measured
(:func:`privframe.synth.model.estimate`); a synthetic table is a sample of it.
The costs add up to at most the budget exactly (Fractions); everything after
a measurement is post-processing.

- **MST** (McKenna, Miklau & Sheldon 2021, "Winning the NIST Contest",
  JPC 11(3), Sec. 4): a third of ρ measures every 1-way marginal; a third
  chooses a spanning tree of pairs by the exponential mechanism, one edge at
  a time among those joining two components (Kruskal's order), each scored by
  how far the independence model of the 1-way marginals is from the pair's
  counts (L1); the last third measures the chosen pairs.
- **AIM** (McKenna, Mullins, Sheldon & Miklau 2022, "AIM: An Adaptive and
  Iterative Mechanism", PVLDB 15(11), Alg. 1): measures every 1-way marginal
  at a small cost, then in rounds chooses the workload marginal (or a subset
  of one) whose model estimate is worst, discounted by its expected noise and
  weighted by its overlap with the workload, among those keeping the model
  small enough for the budget spent so far; measures it; re-estimates; and
  halves the noise when a measurement stops moving the model (ρ × 4, or
  ε × 2, for both steps). The last round spends what is left.

Example:
    >>> from fractions import Fraction
    >>> from privframe.synth.methods import mst_costs
    >>> mst_costs(Fraction(1), 4)
    (Fraction(1, 12), Fraction(1, 9), Fraction(1, 9))
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

import numpy as np
import numpy.typing as npt

from privframe.synth.model import Domain, Measured, Model, estimate, model_size

__all__ = ["Measurements", "Synthesis", "aim", "aim_workload", "mst", "mst_costs"]

ALPHA = Fraction(9, 10)
"""AIM's share of each round's ρ spent measuring (the rest chooses): the paper's α."""

MAX_MODEL_CELLS = 200_000
"""AIM's model size limit (cells of the junction tree's cliques) once all ρ is spent.

The paper's is 80 MB (10⁷ cells). On a 15-column census-like table this limit
gives the same 2-way error at ρ = 1 as 10⁶ cells in a fifth of the time
(benchmarks/bench_synthetic.py): larger cliques slow every estimate."""

ROUND_ITERATIONS = 25
"""Estimation steps after each AIM round, warm started from the previous model.

Each round adds one measurement to a model fitted to the others, so a few
steps reach most of the fit; the final model gets :data:`FINAL_ITERATIONS`.
25 gave the same error as 50 and 150 in a fifth of the time on that table."""

FINAL_ITERATIONS = 1000
"""Estimation steps of the final model."""


class Measurements(Protocol):
    """The door to the data that MST and AIM use: noisy, at an exact stated cost each.

    A cost is ρ (discrete Gaussian noise) or ε (discrete Laplace noise); the
    door turns it into noise and into the exponential mechanism's ε.
    """

    sharpen: int
    """What a cost is multiplied by to halve a measurement's noise: 4 for ρ, 2 for ε."""

    @property
    def domain(self) -> Domain:
        """Each column's number of values."""
        ...

    def measure(self, columns: tuple[str, ...], cost: Fraction) -> Measured:
        """The noisy marginal over ``columns``, costing ``cost``."""
        ...

    def mean_error(self, cost: Fraction) -> float:
        """The mean absolute noise of one cell measured at ``cost``."""
        ...

    def choose(
        self,
        candidates: Sequence[tuple[str, ...]],
        estimates: Sequence[npt.NDArray[np.float64]],
        weights: Sequence[int],
        offsets: Sequence[float],
        cost: Fraction,
    ) -> int:
        """The exponential mechanism's pick at ``cost``, scored ``w·(‖exact − estimate‖₁ − off)``.

        The scores' sensitivity is the largest ``w`` times the door's row bound.
        """
        ...


@dataclass(frozen=True)
class Synthesis:
    """What a method measured and the model it estimated.

    Attributes:
        model: the graphical model; its samples are the synthetic table.
        measured: the noisy marginals, in order.
    """

    model: Model
    measured: tuple[Measured, ...]


def mst_costs(budget: Fraction, columns: int) -> tuple[Fraction, Fraction, Fraction]:
    """MST's cost for each 1-way marginal, each edge's choice and each pair's measurement.

    A third of the budget (ρ or ε) each to the 1-way marginals, the choices and the pairs; with
    fewer than three columns there is nothing to choose, and the pairs get half.

    Example:
        >>> from fractions import Fraction
        >>> mst_costs(Fraction(1), 2)
        (Fraction(1, 4), Fraction(0, 1), Fraction(1, 2))
    """
    if columns < 2:
        return budget / max(columns, 1), Fraction(0), Fraction(0)
    edges = columns - 1
    if columns == 2:
        return budget / 2 / columns, Fraction(0), budget / 2
    return budget / 3 / columns, budget / 3 / edges, budget / 3 / edges


def mst(door: Measurements, budget: Fraction) -> Synthesis:
    """MST at ``budget``: 1-way marginals, a private spanning tree of pairs, its pairs measured."""
    names = list(door.domain)
    one, choice, pair = mst_costs(budget, len(names))
    measured = [door.measure((c,), one) for c in names]
    independent = estimate(door.domain, measured, iterations=FINAL_ITERATIONS)
    component = {c: i for i, c in enumerate(names)}
    edges = list(itertools.combinations(names, 2))
    for _ in range(len(names) - 1):
        open_edges = [e for e in edges if component[e[0]] != component[e[1]]]
        if choice and len(open_edges) > 1:
            pick = door.choose(
                open_edges,
                [independent.marginal(e) for e in open_edges],
                [1] * len(open_edges),
                [0.0] * len(open_edges),
                choice,
            )
        else:
            pick = 0
        a, b = open_edges[pick]
        merged, into = component[b], component[a]
        component = {c: into if k == merged else k for c, k in component.items()}
        measured.append(door.measure(open_edges[pick], pair))
    model = estimate(door.domain, measured, iterations=FINAL_ITERATIONS)
    return Synthesis(model, tuple(measured))


def aim_workload(
    columns: Sequence[str], workload: Sequence[Sequence[str]] | None
) -> list[tuple[str, ...]]:
    """AIM's workload: the given column sets, or every pair of columns (one column: itself).

    Example:
        >>> aim_workload(["a", "b", "c"], None)
        [('a', 'b'), ('a', 'c'), ('b', 'c')]
    """
    if workload is not None:
        return [tuple(s) for s in workload]
    if len(columns) == 1:
        return [tuple(columns)]
    return list(itertools.combinations(columns, 2))


def aim_costs(budget: Fraction, columns: int) -> tuple[Fraction, Fraction]:
    """AIM's first costs of a measurement and of a choice: its cheapest (they only grow).

    With T = 16·d rounds planned, α·budget/T and (1 − α)·budget/T. A round
    that would leave less than its own cost spends all that is left, so no
    later cost is smaller.

    Example:
        >>> from fractions import Fraction
        >>> aim_costs(Fraction(1), 5)
        (Fraction(9, 800), Fraction(1, 800))
    """
    rounds = 16 * columns
    return ALPHA * budget / rounds, (1 - ALPHA) * budget / rounds


def aim_candidates(
    names: Sequence[str], workload: Sequence[tuple[str, ...]]
) -> list[tuple[tuple[str, ...], int]]:
    """Every non-empty subset of a workload set, with AIM's weight Σ_s |r ∩ s| (Sec. 4.3).

    Example:
        >>> aim_candidates(["a", "b"], [("a", "b")])
        [(('a',), 1), (('b',), 1), (('a', 'b'), 2)]
    """
    found: dict[tuple[str, ...], int] = {}
    for s in workload:
        for k in range(1, len(s) + 1):
            for r in itertools.combinations(sorted(s, key=names.index), k):
                found.setdefault(r, 0)
    return [(r, sum(len(set(r) & set(s)) for s in workload)) for r in found]


def aim(door: Measurements, budget: Fraction, workload: Sequence[tuple[str, ...]]) -> Synthesis:
    """AIM at ``budget`` over ``workload``: column sets the synthetic data should be accurate on."""
    domain = door.domain
    names = list(domain)
    measure_cost, choose_cost = aim_costs(budget, len(names))
    measured = [door.measure((c,), measure_cost) for c in names]
    used = measure_cost * len(names)
    model = estimate(domain, measured, iterations=ROUND_ITERATIONS)
    candidates = aim_candidates(names, workload)
    while used < budget:
        left = budget - used
        if left <= 2 * (measure_cost + choose_cost):
            measure_cost, choose_cost = ALPHA * left, (1 - ALPHA) * left
        used += measure_cost + choose_cost
        noise = door.mean_error(measure_cost)
        cliques = [m.columns for m in measured]
        limit = used / budget * MAX_MODEL_CELLS
        allowed = [(r, w) for r, w in candidates if model_size(domain, [*cliques, r]) <= limit] or [
            (r, w) for r, w in candidates if len(r) == 1
        ]
        estimates = [model.marginal(r) for r, _ in allowed]
        # AIM's score discounts the L1 error a measurement's noise alone would leave.
        offsets = [noise * math.prod(domain[c] for c in r) for r, _ in allowed]
        pick = door.choose(
            [r for r, _ in allowed],
            estimates,
            [w for _, w in allowed],
            offsets,
            choose_cost,
        )
        chosen = allowed[pick][0]
        measured.append(door.measure(chosen, measure_cost))
        before = estimates[pick]
        model = estimate(domain, measured, iterations=ROUND_ITERATIONS, warm=model)
        if np.abs(model.marginal(chosen) - before).sum() <= offsets[pick]:
            measure_cost, choose_cost = door.sharpen * measure_cost, door.sharpen * choose_cost
    model = estimate(domain, measured, iterations=FINAL_ITERATIONS, warm=model)
    return Synthesis(model, tuple(measured))
