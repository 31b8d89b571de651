"""Bundled synthetic data for demos, docs and tests: no real person is in it.

The generator is deterministic in its seed and draws its randomness from the
seeded SHAKE-256 stream of :class:`~privframe.mechanisms.noise.SeededRandomness` (never
from a floating-point PRNG), turned into uniforms, normals and categories with
numpy. That stream is reproducible and public, which is what demo *data* needs;
it is never used here for noise.

Example:
    >>> from privframe.api.datasets import synthetic_transactions
    >>> df = synthetic_transactions(n_rows=1_000, seed=1)
    >>> df.columns
    ['user_id', 'region', 'month', 'amount', 'age']
    >>> df.height, df["user_id"].n_unique() <= 100
    (1000, True)
"""

from __future__ import annotations

import operator

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy

from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.mechanisms.noise import SeededRandomness

__all__ = ["REGIONS", "synthetic_transactions"]

REGIONS: tuple[str, ...] = ("north", "south", "east", "west")
"""The regions of :func:`synthetic_transactions`, also its natural public keys."""

_REGION_WEIGHTS = np.array([0.4, 0.3, 0.2, 0.1])
_P_HOME = 0.8  # the share of a user's rows in their home region
_SCHEMA = {
    "user_id": pl.Int64,
    "region": pl.String,
    "month": pl.Int64,
    "amount": pl.Float64,
    "age": pl.Int64,
}


class _Stream:
    """Uniforms and normals from a seeded word stream (public, reproducible)."""

    def __init__(self, seed: int) -> None:
        # A tag keeps this stream apart from a SeededRandomness(seed) used for noise.
        self._words = SeededRandomness(f"privframe.api.datasets/{seed}".encode())

    def uniform(self, n: int) -> npt.NDArray[np.float64]:
        """Return n floats in (0, 1): each word's top 53 bits, offset by half a step."""
        top = (self._words.words(n) >> np.uint64(11)).astype(np.float64)
        return (top + 0.5) * 2.0**-53

    def normal(self, n: int) -> npt.NDArray[np.float64]:
        """Return n standard normals by inversion: Φ⁻¹(u)."""
        return np.asarray(scipy.special.ndtri(self.uniform(n)), dtype=np.float64)

    def choice(self, n: int, weights: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """Return n indices into ``weights``, drawn with those (unnormalized) probabilities."""
        cumulative = np.cumsum(weights, dtype=np.float64)
        picks = np.searchsorted(cumulative, self.uniform(n) * cumulative[-1], side="right")
        return np.minimum(picks, len(weights) - 1).astype(np.int64)


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    try:
        v = operator.index(value)  # type: ignore[arg-type]  # a TypeError is the answer, below
    except TypeError:
        raise InvalidArgumentError(
            f"{name} must be an integer, got {type(value).__name__}"
        ) from None
    if v < minimum:
        raise InvalidValueError(f"{name} must be >= {minimum}, got {v}")
    return v


def _seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidArgumentError(f"seed must be an integer, got {type(seed).__name__}")
    return seed


def synthetic_transactions(
    n_rows: int = 100_000, n_users: int | None = None, seed: int = 0
) -> pl.DataFrame:
    """Synthetic card transactions: several rows per user, skewed regions, heavy amounts.

    Demo data, deterministic in ``seed``; the same arguments always give the
    same frame. Columns:

    * ``user_id`` (Int64): the person; activity is skewed, so a few users
      have many rows (what contribution bounding is for).
    * ``region`` (String): north, south, east or west (about 40/30/20/10%);
      each user has a home region holding about 80% of their rows.
    * ``month`` (Int64): 1 to 12, uniform.
    * ``amount`` (Float64): positive, log-normal (median about 33, a long
      right tail with a few amounts in the thousands), rounded to cents.
    * ``age`` (Int64): 16 to 90, fixed per user; some users are under 18.

    Args:
        n_rows: the number of rows (0 or more).
        n_users: the number of distinct users to draw from; default
            ``max(1, n_rows // 10)``.
        seed: any integer; different seeds give different data.

    Returns:
        A polars DataFrame; ``.to_pandas()`` it for pandas.

    Example:
        >>> from privframe.api.datasets import synthetic_transactions
        >>> df = synthetic_transactions(n_rows=500, n_users=50, seed=3)
        >>> sorted(df["region"].unique().to_list())
        ['east', 'north', 'south', 'west']
        >>> bool(df["amount"].min() > 0), df["age"].min() >= 16, df["age"].max() <= 90
        (True, True, True)
    """
    n_rows = _count("n_rows", n_rows, 0)
    n_users = max(1, n_rows // 10) if n_users is None else _count("n_users", n_users, 1)
    stream = _Stream(_seed(seed))
    # Per user: a log-normal activity weight, a home region and an age.
    activity = np.exp(1.2 * stream.normal(n_users))
    home = stream.choice(n_users, _REGION_WEIGHTS)
    age = np.clip(np.rint(42.0 + 16.0 * stream.normal(n_users)), 16, 90).astype(np.int64)

    # Per row: whose it is, where, when and how much.
    user = stream.choice(n_rows, activity)
    away = stream.uniform(n_rows) >= _P_HOME
    region = np.where(away, stream.choice(n_rows, _REGION_WEIGHTS), home[user])
    month = np.minimum(np.floor(stream.uniform(n_rows) * 12), 11).astype(np.int64) + 1
    amount = np.round(np.exp(3.5 + 1.0 * stream.normal(n_rows)), 2)
    amount = np.maximum(amount, 0.01)

    return pl.DataFrame(
        {
            "user_id": user + 1,
            "region": pl.Series("region", REGIONS, pl.String).gather(region),
            "month": month,
            "amount": amount,
            "age": age[user],
        },
        schema=_SCHEMA,
    )
