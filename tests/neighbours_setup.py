"""Neighbouring data: D, and D plus one person whose amount is not an integer.

D holds 500 people with an integer ``amount``; each neighbour adds one more
person whose amount is ``n/a`` or ``12.5``. As CSV files, and as pandas
frames whose ``amount`` is an object column: inferred from the values, the
neighbours' ``amount`` would be String (or unreadable) or Float64 where D's
is Int64.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PEOPLE = 500
REGIONS = ["north", "south", "east", "west"]
ODD_AMOUNTS: dict[str, object] = {"na": "n/a", "decimal": 12.5}
"""The added person's amount, by the neighbour's name."""


def _neighbours() -> dict[str, list[tuple[int, str, object]]]:
    """Each dataset's rows (user_id, region, amount), by name: ``"d"`` and its neighbours."""
    rows: list[tuple[int, str, object]] = [
        (i, REGIONS[i % 4], (i * 37) % 1000) for i in range(PEOPLE)
    ]
    return {
        "d": rows,
        **{name: [*rows, (PEOPLE, "north", odd)] for name, odd in ODD_AMOUNTS.items()},
    }


def write_neighbours(folder: Path) -> dict[str, Path]:
    """D (``"d"``) and its neighbours (``"na"``, ``"decimal"``) as CSV files in ``folder``."""
    paths = {}
    for name, rows in _neighbours().items():
        paths[name] = folder / f"{name}.csv"
        lines = [f"{unit},{region},{amount}" for unit, region, amount in rows]
        paths[name].write_text("user_id,region,amount\n" + "\n".join(lines) + "\n")
    return paths


def neighbour_frames() -> dict[str, pd.DataFrame]:
    """D and its neighbours as pandas frames, ``amount`` an object column (in D too)."""
    frames = {}
    for name, rows in _neighbours().items():
        units, regions, amounts = zip(*rows, strict=True)
        frames[name] = pd.DataFrame(
            {"user_id": units, "region": regions, "amount": pd.Series(amounts, dtype=object)}
        )
    return frames
