"""The row limits that steps over units imply, and how resolve_limits combines them with a bound."""

from __future__ import annotations

import polars as pl
import pytest

import privframe as pf
from privframe.engines.spec import FlatMap, PerUnit, PrivateJoin, RowStep, UnitColumns
from privframe.plan.ir import Bound, Plan
from privframe.plan.planner import resolve_limits
from privframe.plan.stages import stage_limits


def _join(left: int, right: int, steps: tuple = ()) -> PrivateJoin:
    return PrivateJoin("b", steps, ("u",), "inner", left_rows=left, right_rows=right)


def test_a_private_join_limits_a_unit_to_l_times_r_rows() -> None:
    assert stage_limits((_join(4, 3),), ()).max_rows == 12


def test_earlier_limits_tighten_each_side_of_a_join() -> None:
    flat = FlatMap("items", "items", max_rows=2)
    assert stage_limits((flat, _join(4, 3)), ()).max_rows == 2 * 3
    assert stage_limits((_join(4, 3, steps=(flat,)),), ()).max_rows == 4 * 2


def test_a_flat_map_replaces_the_row_limit_with_its_own() -> None:
    assert stage_limits((_join(2, 2), FlatMap("x", "x", max_rows=7)), ()).max_rows == 7


def test_a_per_unit_stage_gives_one_row_per_group_only_when_grouped_by_all_its_columns() -> None:
    stage = PerUnit(("region", "month"), ())
    assert stage_limits((stage,), ("region", "month")).max_rows_per_group == 1
    assert stage_limits((stage,), ("region",)).max_rows_per_group is None
    assert stage_limits((stage,), ("region", "month")).max_rows is None
    assert stage_limits((PerUnit((), ()),), ()).max_rows == 1


def test_rewriting_a_per_unit_column_ends_its_one_row_per_group() -> None:
    rewrite = RowStep("with_columns", (pl.lit("x").alias("region"),))
    other = RowStep("with_columns", (pl.lit(1).alias("other"),))
    stage = PerUnit(("region",), ())
    assert stage_limits((stage, rewrite), ("region",)).max_rows_per_group is None
    assert stage_limits((stage, other), ("region",)).max_rows_per_group == 1


def test_steps_that_add_no_rows_keep_the_limits() -> None:
    steps = (
        _join(2, 3),
        RowStep("filter", (pl.col("x") > 0,)),
        UnitColumns((("t", pf.unit.sum("x")),)),
    )
    assert stage_limits(steps, ()).max_rows == 6


def test_resolve_limits_takes_the_tighter_of_the_bound_and_the_steps() -> None:
    plan = Plan(steps=(_join(4, 3),), bound=Bound(max_groups=2, max_rows_per_group=5))
    limits = resolve_limits(plan, has_unit=True)
    assert (limits.max_groups, limits.max_rows_per_group, limits.max_rows) == (1, 5, 12)
    tighter = Plan(steps=(_join(4, 3),), bound=Bound(max_groups=1, max_rows=2))
    assert resolve_limits(tighter, has_unit=True).max_rows == 2


def test_derived_limits_need_no_bound_and_are_described() -> None:
    keys = pf.keys.from_list("g", ["a", "b", "c"])
    plan = Plan(steps=(_join(2, 2),), group_by=("g",), keys=keys)
    limits = resolve_limits(plan, has_unit=True)
    # M = 4 rows in at most 3 groups: S = 4² when all four rows sit in one group.
    assert (limits.max_rows_per_group, limits.max_rows, limits.squares) == (4, 4, 16)
    assert limits.describe().startswith("join_private(b): at most 2 left × 2 right rows")


def test_a_derived_row_limit_bounds_the_groups_of_a_private_selection() -> None:
    plan = Plan(steps=(FlatMap("x", "x", max_rows=3),), group_by=("x",))
    assert resolve_limits(plan, has_unit=True).max_groups == 3


def test_a_per_unit_stage_with_by_still_needs_a_bound_to_choose_groups_privately() -> None:
    plan = Plan(steps=(PerUnit(("region",), ()),), group_by=("region",))
    with pytest.raises(pf.InvalidValueError, match="max_groups"):
        resolve_limits(plan, has_unit=True)


def test_a_per_person_column_rewriting_a_per_unit_column_ends_its_one_row_per_group() -> None:
    stage = PerUnit(("region", "clinic"), (("total", pf.unit.sum("x")),))
    rewrite = UnitColumns((("clinic", pf.unit.first("clinic", by="total")),))
    limits = stage_limits((stage, rewrite), ("region", "clinic"))
    assert limits.max_rows_per_group is None
    assert "rewritten" in limits.lines[-1]


def test_other_ends_a_per_unit_stages_one_row_per_group() -> None:
    keys = pf.keys.from_list("region", ["n", "s"])
    stage = PerUnit(("region",), ())
    plain = Plan(steps=(stage,), group_by=("region",), keys=keys, bound=Bound(max_groups=2))
    assert resolve_limits(plain, has_unit=True).max_rows_per_group == 1
    other = Plan(
        steps=(stage,),
        group_by=("region",),
        keys=keys,
        other="rest",
        bound=Bound(max_groups=2, max_rows_per_group=4),
    )
    assert resolve_limits(other, has_unit=True).max_rows_per_group == 4
