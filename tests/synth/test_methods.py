"""MST and AIM spend exactly their budget, in the steps their papers describe.

A recording door stands in for the data: it answers each measurement with a
fixed table plus small noise and each choice at random, and records every
cost. Whatever the door answers, the costs must add up to the budget exactly
(Fractions), in zCDP (noise halves at 4× the cost) and in pure DP (at 2×),
with every measurement and choice at a positive cost.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt
import pytest

from privframe.synth.methods import aim, aim_candidates, aim_costs, aim_workload, mst
from privframe.synth.model import Domain, Measured

SIZES = [2, 3, 2, 4, 3]


class RecordingDoor:
    """The data's door, faked: records what MST and AIM measure and choose, and at what cost."""

    def __init__(self, columns: int, sharpen: int, seed: int) -> None:
        self.sharpen = sharpen
        self._domain = {f"c{i}": SIZES[i] for i in range(columns)}
        self._rng = np.random.default_rng(seed)
        self.costs: list[tuple[str, tuple[str, ...], Fraction]] = []

    @property
    def domain(self) -> Domain:
        return dict(self._domain)

    def measure(self, columns: tuple[str, ...], cost: Fraction) -> Measured:
        self.costs.append(("measure", columns, cost))
        shape = tuple(self._domain[c] for c in columns)
        values = 100 / math.prod(shape) + self._rng.normal(0, 1, shape)
        return Measured(columns, values, 1.0)

    def mean_error(self, cost: Fraction) -> float:
        return 1 / float(cost)

    def choose(
        self,
        candidates: Sequence[tuple[str, ...]],
        estimates: Sequence[npt.NDArray[np.float64]],
        weights: Sequence[int],
        offsets: Sequence[float],
        cost: Fraction,
    ) -> int:
        assert len(candidates) == len(estimates) == len(weights) == len(offsets)
        self.costs.append(("choose", (), cost))
        return int(self._rng.integers(len(candidates)))


CASES = list(
    itertools.product([1, 2, 3, 5], [4, 2], [Fraction(1), Fraction(7, 3), Fraction(1, 10**6)])
)


@pytest.mark.parametrize(("columns", "sharpen", "budget"), CASES)
def test_mst_spends_its_budget_exactly_on_a_spanning_tree(
    columns: int, sharpen: int, budget: Fraction
) -> None:
    door = RecordingDoor(columns, sharpen, seed=columns)
    mst(door, budget)
    assert sum(c for _, _, c in door.costs) == budget
    assert all(c > 0 for _, _, c in door.costs)
    measured = [s for kind, s, _ in door.costs if kind == "measure"]
    assert measured[:columns] == [(c,) for c in door.domain]
    pairs = measured[columns:]
    assert len(pairs) == columns - 1
    joined = {c: {c} for c in door.domain}
    for a, b in pairs:  # a spanning tree: every pair joins two components
        assert joined[a] is not joined[b]
        merged = joined[a] | joined[b]
        for c in merged:
            joined[c] = merged


@pytest.mark.parametrize(("columns", "sharpen", "budget"), CASES)
def test_aim_spends_its_budget_exactly(columns: int, sharpen: int, budget: Fraction) -> None:
    door = RecordingDoor(columns, sharpen, seed=10 + columns)
    workload = aim_workload(list(door.domain), None)
    result = aim(door, budget, workload)
    assert sum(c for _, _, c in door.costs) == budget
    first_measure, first_choice = aim_costs(budget, columns)
    assert [c for kind, _, c in door.costs if kind == "measure"][:columns] == [
        first_measure
    ] * columns
    assert min(c for kind, _, c in door.costs if kind == "measure") >= first_measure
    assert min((c for kind, _, c in door.costs if kind == "choose"), default=first_choice) >= (
        first_choice
    )
    candidates = {r for r, _ in aim_candidates(list(door.domain), workload)}
    assert {m.columns for m in result.measured} <= candidates


def test_aim_candidates_weigh_their_overlap_with_the_workload() -> None:
    found = dict(aim_candidates(["a", "b", "c"], [("a", "b"), ("b", "c")]))
    assert found == {("a",): 1, ("b",): 2, ("c",): 1, ("a", "b"): 3, ("b", "c"): 3}
