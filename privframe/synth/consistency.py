"""Noisy marginals made non-negative and consistent where they share columns: post-processing.

Each marginal ``y_i`` over columns ``C_i`` is measured with noise of std
``σ_i`` per cell. The estimate is the weighted least-squares point nearest the
measurements, weights ``1/σ_i²``, among the marginals that are

- **consistent**: any two marginals sum to the same table over their shared
  columns (and to the same total when they share none), and
- **non-negative**: every cell is at least 0.

Both sets are convex, so the projection onto their intersection is unique; it
is found by Dykstra's alternating projections (Boyle & Dykstra 1986; Bauschke
& Borwein 1994, Thm. 3.3), projecting in turn onto each shared column set's
agreement (a subspace, whose projection needs no correction term) and onto
the non-negative orthant. Projecting onto one agreement has a closed form:
every marginal over ``S`` ⊆ ``C_i`` moves to the inverse-variance weighted mean
of their sums over ``S`` (a sum of ``n`` cells has variance ``n·σ_i²``), each
spreading its change evenly over the cells it sums (PriView's consistency
step, Qardaji, Yang & Li 2014, Sec. 4.3, is the same weighted mean).

Reading only noisy measurements and public parameters, this costs no privacy
(Dwork & Roth 2014, Prop. 2.1). It is local consistency: marginals whose
shared columns agree pairwise, which for some column sets (a cycle of three
2-way marginals) no single table need have.

Example:
    >>> import numpy as np
    >>> from privframe.synth.consistency import consistent
    >>> a = np.array([[4.0, -1.0], [2.0, 5.0]])   # over (x, y)
    >>> b = np.array([2.0, 8.0])                  # over (x,)
    >>> fixed = consistent([("x", "y"), ("x",)], [a, b], [1.0, 1.0])
    >>> bool((fixed[0] >= 0).all()), np.allclose(fixed[0].sum(axis=1), fixed[1])
    (True, True)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from privframe.errors import InvalidValueError

__all__ = ["consistent"]

_SWEEPS = 20_000
"""The most rounds of projections; each round projects onto every agreement and the orthant."""

_TOLERANCE = 1e-9
"""A round that moves no cell by more than this (relative to the largest cell) ends the search."""


def consistent(
    column_sets: Sequence[tuple[str, ...]],
    values: Sequence[npt.NDArray[np.float64]],
    sigmas: Sequence[float],
) -> list[npt.NDArray[np.float64]]:
    """The non-negative, consistent marginals nearest ``values`` in the ``1/σ²``-weighted norm.

    Args:
        column_sets: each marginal's columns, in its axes' order.
        values: each marginal's noisy cells, one axis per column.
        sigmas: each marginal's noise std per cell (> 0).

    Returns:
        The estimates, shaped like ``values``: at least 0, and consistent up
        to what the last round of projections still moved (it stops when no
        cell moves by more than 1e-9 of the largest: the tables then agree to
        about 1e-7 of it).

    Raises:
        InvalidValueError: a column's axis has different lengths in two marginals.

    Example:
        >>> import numpy as np
        >>> from privframe.synth.consistency import consistent
        >>> x, y = consistent([("a",), ("a",)], [np.array([3.0, 1.0]), np.array([1.0, 1.0])],
        ...                   [1.0, 1.0])
        >>> x.tolist(), y.tolist()
        ([2.0, 1.0], [2.0, 1.0])
    """
    sizes = _sizes(column_sets, values)
    cells = [np.array(v, dtype=np.float64, copy=True) for v in values]
    groups = _agreements(column_sets)
    # Dykstra's correction term, needed for the orthant alone (its sets are not subspaces).
    correction = [np.zeros_like(c) for c in cells]
    scale = max((float(np.abs(c).max()) for c in cells if c.size), default=0.0) + 1.0
    for _ in range(_SWEEPS):
        before = [c.copy() for c in cells]
        for shared, members in groups:
            _agree(cells, column_sets, sigmas, sizes, shared, members)
        for i, c in enumerate(cells):
            moved = c + correction[i]
            cells[i] = np.maximum(moved, 0.0)
            correction[i] = moved - cells[i]
        change = max(float(np.abs(c - b).max()) for c, b in zip(cells, before, strict=True))
        if change <= _TOLERANCE * scale:
            break
    return cells


def _sizes(
    column_sets: Sequence[tuple[str, ...]], values: Sequence[npt.NDArray[np.float64]]
) -> dict[str, int]:
    """Each column's number of values, checked to be the same in every marginal."""
    sizes: dict[str, int] = {}
    for columns, v in zip(column_sets, values, strict=True):
        for column, n in zip(columns, np.shape(v), strict=True):
            if sizes.setdefault(column, n) != n:
                raise InvalidValueError(
                    f"column {column!r} has {sizes[column]} values in one marginal and {n} in "
                    "another"
                )
    return sizes


def _agreements(column_sets: Sequence[tuple[str, ...]]) -> list[tuple[tuple[str, ...], list[int]]]:
    """Every set two marginals share (the empty set: their totals), with the marginals over it.

    Smaller sets first: agreeing on a set's subsets first is PriView's order,
    which converges in fewer rounds.
    """
    shared: set[frozenset[str]] = set()
    for a, b in itertools.combinations(column_sets, 2):
        shared.add(frozenset(a) & frozenset(b))
    groups = []
    for common in sorted(shared, key=lambda s: (len(s), sorted(s))):
        members = [i for i, c in enumerate(column_sets) if common <= set(c)]
        if len(members) > 1:
            groups.append((tuple(sorted(common)), members))
    return groups


def _agree(
    cells: list[npt.NDArray[np.float64]],
    column_sets: Sequence[tuple[str, ...]],
    sigmas: Sequence[float],
    sizes: dict[str, int],
    shared: tuple[str, ...],
    members: list[int],
) -> None:
    """Project ``members`` onto agreeing over ``shared``, in place (the weighted projection)."""
    sums = [_sum_to(cells[i], column_sets[i], shared) for i in members]
    # A sum over `spread` cells has variance spread·σ²; its change is spread over them evenly.
    spreads = [int(np.prod([sizes[c] for c in column_sets[i] if c not in shared])) for i in members]
    precision = [1.0 / (n * float(sigmas[i]) ** 2) for i, n in zip(members, spreads, strict=True)]
    target = sum(s * p for s, p in zip(sums, precision, strict=True)) / sum(precision)
    for i, s, n in zip(members, sums, spreads, strict=True):
        cells[i] += _expand((target - s) / n, shared, column_sets[i])


def _sum_to(
    cells: npt.NDArray[np.float64], columns: tuple[str, ...], shared: tuple[str, ...]
) -> npt.NDArray[np.float64]:
    """The marginal's sums over ``shared`` (axes in ``shared``'s order)."""
    others = tuple(i for i, c in enumerate(columns) if c not in shared)
    summed = cells.sum(axis=others)
    kept = [c for c in columns if c in shared]
    return np.transpose(summed, [kept.index(c) for c in shared])


def _expand(
    change: npt.NDArray[np.float64], shared: tuple[str, ...], columns: tuple[str, ...]
) -> npt.NDArray[np.float64]:
    """``change`` over ``shared`` as an array that broadcasts over a marginal over ``columns``."""
    order = [c for c in columns if c in shared]
    moved = np.transpose(change, [shared.index(c) for c in order]) if order else change
    shape = [moved.shape[order.index(c)] if c in shared else 1 for c in columns]
    return np.reshape(moved, shape)
