"""Report specs and the notebook view with public keys for some group columns only."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import privframe as pf
from privframe.api.html import query_html
from privframe.api.report import load_spec, prepare

REGIONS = ["north", "south", "east", "west", "atlantis"]  # atlantis has no rows

SPEC = """
[report]
title = "Monthly"

[data]
path = "data.parquet"
privacy_unit = "user_id"

[budget]
rho = 1.0
delta = 1e-6
ledger = "ledger.sqlite"

[metadata]
amount = { bounds = [0, 1000] }
region = { keys = ["north", "south", "east", "west", "atlantis"] }

[contributions]
max_groups = 12
max_rows_per_group = 5

[[queries]]
name = "by_region_month"
group_by = ["region", "month"]
aggregates = [{ kind = "count" }]
rho = 0.5
delta = 1e-7
"""


def test_a_report_query_releases_every_public_key_for_each_selected_combination(
    tmp_path: Path,
) -> None:
    frame = pf.datasets.synthetic_transactions(n_rows=20_000, seed=5)
    frame.write_parquet(tmp_path / "data.parquet")
    (tmp_path / "spec.toml").write_text(SPEC)
    prepared = prepare(load_spec(tmp_path / "spec.toml"))
    prepared.run(tmp_path / "out")
    released = pl.read_csv(tmp_path / "out" / "by_region_month.csv")
    months = released["month"].unique().to_list()
    assert months
    assert set(months) <= set(frame["month"].unique().to_list())
    assert released.height == len(REGIONS) * len(months)
    assert set(released["region"]) == set(REGIONS)


def test_the_query_view_says_which_group_columns_are_chosen_privately() -> None:
    sess = pf.Session(pl.DataFrame({"r": ["a"], "m": [1]}), None, pf.zCDP(1.0, delta=1e-6))
    query = sess.query().bound(max_groups=1).group_by(["r", "m"], keys=pf.keys.product(r=["a"]))
    shown = query_html(query)
    assert "1 public over [&#x27;r&#x27;]" in shown or "1 public over ['r']" in shown
    assert "chosen privately" in shown


@pytest.mark.parametrize("keys", [{"region": ["north"]}, {}])
def test_a_report_spec_with_keys_for_some_or_no_group_columns_loads(
    tmp_path: Path, keys: dict[str, list[str]]
) -> None:
    spec = SPEC.replace(
        'region = { keys = ["north", "south", "east", "west", "atlantis"] }',
        "".join(f"{c} = {{ keys = {v!r} }}".replace("'", '"') for c, v in keys.items()),
    )
    (tmp_path / "spec.toml").write_text(spec)
    (query,) = load_spec(tmp_path / "spec.toml").queries
    assert query.keys is None if not keys else list(query.keys.columns) == ["region"]
