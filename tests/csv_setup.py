"""Neighbouring CSV files: D, and D plus one person whose amount is not an integer.

D holds 500 people with an integer ``amount``; each neighbour adds one more
person whose amount is ``n/a`` or ``12.5``. Inferred from the values, the
neighbours' ``amount`` would be String or Float64 where D's is Int64.
"""

from __future__ import annotations

from pathlib import Path

PEOPLE = 500
REGIONS = ["north", "south", "east", "west"]
ODD_AMOUNTS = {"na": "n/a", "decimal": "12.5"}
"""The added person's amount, by the neighbour's name."""


def write_neighbours(folder: Path) -> dict[str, Path]:
    """D (``"d"``) and its neighbours (``"na"``, ``"decimal"``) as CSV files in ``folder``."""
    rows = [f"{i},{REGIONS[i % 4]},{(i * 37) % 1000}" for i in range(PEOPLE)]
    files = {
        "d": rows,
        **{name: [*rows, f"{PEOPLE},north,{odd}"] for name, odd in ODD_AMOUNTS.items()},
    }
    paths = {}
    for name, lines in files.items():
        paths[name] = folder / f"{name}.csv"
        paths[name].write_text("user_id,region,amount\n" + "\n".join(lines) + "\n")
    return paths
