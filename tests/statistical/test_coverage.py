"""Coverage of the released 95% intervals, with and without post-processing.

Every output's ``<name>_ci95`` half-width (exact for a count; the normal
quantile of a sum of two independent discrete Gaussians for a sum; the delta
method for a mean) must cover the true value in 94–97% of releases: under 94%
the interval claims more than it gives, over 97% it wastes accuracy.

Sizes: 500 releases of a 10-group query, so 5,000 intervals per output. A
coverage of 0.95 is then estimated within ±0.0031 (one standard error), so
the band's lower edge is 3.2 standard errors away and the upper 6.5: a correct
interval fails with probability below 1e-3 per check. The stream is a fixed
``SeededRandomness``, so each run is reproducible.

With ``clamp=True`` (the default) a clamped estimate is never farther from the
truth, so coverage can only rise; the groups here hold hundreds of rows and
one small group (4 rows), where clamping at 0 binds now and then, so the
clamped coverage must stay in the band too. ``intervals=True`` gives the
interval's ends clipped to the possible range; the truth is always in that
range, so they cover exactly as often as the unclipped interval.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning"),
]

RELEASES = 500
RHO = 0.05
KEYS = [f"g{i}" for i in range(10)]
BOUNDS = (0.0, 100.0)
OUTPUTS = ("count", "x_sum", "x_mean")
BAND = (0.94, 0.97)


def _data() -> pl.DataFrame:
    """3,000 units with 1–2 rows in one group each (the bounds never bind); g9 has 4 rows."""
    rng = np.random.default_rng(7)
    groups = rng.choice(KEYS[:-1], size=3000)
    rows = rng.integers(1, 3, size=3000)
    frame = pl.DataFrame(
        {
            "u": np.repeat(np.arange(3000), rows),
            "g": np.repeat(groups, rows),
            "x": rng.gamma(2.0, 15.0, size=int(rows.sum())).clip(*BOUNDS),
        }
    )
    small = pl.DataFrame({"u": [5000, 5001, 5002, 5003], "g": ["g9"] * 4, "x": [1.0, 2, 3, 90]})
    return pl.concat([frame, small])


DATA = _data()
TRUTH = (
    pl.DataFrame({"g": KEYS})
    .join(
        DATA.group_by("g").agg(
            pl.len().alias("count"), pl.col("x").sum().alias("x_sum"), pl.col("x").mean()
        ),
        on="g",
        how="left",
        maintain_order="left",
    )
    .rename({"x": "x_mean"})
)


@pytest.fixture(scope="module", params=[True, False], ids=["clamped", "unclamped"])
def released(request: pytest.FixtureRequest) -> tuple[bool, pl.DataFrame]:
    clamp = request.param
    sess = pf.Session(DATA, "u", pf.zCDP(RELEASES * RHO), rng=SeededRandomness(40 + clamp))
    query = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=2)
        .group_by("g", keys=KEYS)
        .agg(pf.count(), pf.sum("x", bounds=BOUNDS), pf.mean("x", bounds=BOUNDS))
    )
    results = [
        query.release(RHO, with_error=True, intervals=True, clamp=clamp) for _ in range(RELEASES)
    ]
    frame = pl.concat(results)
    assert isinstance(frame, pl.DataFrame)
    return clamp, frame


def _truth(frame: pl.DataFrame, output: str) -> np.ndarray:
    return np.tile(TRUTH[output].to_numpy(), len(frame) // len(KEYS))


@pytest.mark.parametrize("output", OUTPUTS)
def test_ci95_covers_the_truth_in_94_to_97_percent(
    released: tuple[bool, pl.DataFrame], output: str
) -> None:
    clamp, frame = released
    error = np.abs(frame[output].to_numpy() - _truth(frame, output))
    coverage = float(np.mean(error <= frame[f"{output}_ci95"].to_numpy()))
    print(f"\n{output} ({'clamped' if clamp else 'unclamped'}): coverage {coverage:.4f}")
    assert BAND[0] <= coverage <= BAND[1]


@pytest.mark.parametrize("output", OUTPUTS)
def test_clipped_intervals_cover_as_often_as_the_unclipped(
    released: tuple[bool, pl.DataFrame], output: str
) -> None:
    _, frame = released
    truth = _truth(frame, output)
    low, high = frame[f"{output}_ci95_low"].to_numpy(), frame[f"{output}_ci95_high"].to_numpy()
    coverage = float(np.mean((low <= truth) & (truth <= high)))
    assert BAND[0] <= coverage <= BAND[1]


def test_clamping_keeps_estimates_in_range_and_never_widens_intervals(
    released: tuple[bool, pl.DataFrame],
) -> None:
    clamp, frame = released
    count, mean = frame["count"].to_numpy(), frame["x_mean"].to_numpy()
    low = frame["count_ci95_low"].to_numpy()
    if clamp:
        assert (count >= 0).all()
        assert ((mean >= BOUNDS[0]) & (mean <= BOUNDS[1])).all()
        assert (low >= 0).all()
    else:
        # Unclamped, the small group's noisy count goes below zero in some releases.
        assert (count < 0).any()
        assert (low < 0).any()
