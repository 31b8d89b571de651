"""Checking a plan against the data's public schema, before any data is read.

Column names and types are public schema (``docs/privacy.md``); every check
here runs on them, on zero rows or on one row of nulls, never on the data.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> from privframe.api.schema import validate
    >>> from privframe.plan.ir import Plan
    >>> dict(validate(pl.Schema({"x": pl.Float64}), None, Plan(aggregates=(pf.count(),))))
    {'x': Float64}
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import polars as pl

from privframe.engines.expressions import check_types, plain_types
from privframe.engines.names import refuse_case_twins
from privframe.engines.spec import (
    FlatMap,
    PerUnit,
    PrivateJoin,
    RowStep,
    Step,
    UnitColumns,
    apply_steps,
)
from privframe.errors import InvalidArgumentError, InvalidValueError, columns_note
from privframe.plan import auto_bounds
from privframe.plan.ir import Plan
from privframe.plan.keys import exact_keys

__all__ = ["public_table", "schema_after", "validate"]


def schema_after(
    data_schema: pl.Schema,
    unit: str | None,
    plan: Plan,
    tables: Mapping[str, pl.Schema] | None = None,
) -> pl.Schema:
    """The columns and types the aggregation sees, from the data's schema alone (no data is read).

    ``tables`` are the schemas of the session's other private tables, which a
    private join reads.

    Example:
        >>> import polars as pl
        >>> from privframe.api.schema import schema_after
        >>> from privframe.plan.ir import Plan
        >>> dict(schema_after(pl.Schema({"x": pl.Int64}), None, Plan()))
        {'x': Int64}
    """
    tables = dict(tables or {})
    _check_new_names(list(data_schema), unit, plan.steps, tables)
    empty = {name: pl.LazyFrame(schema=schema) for name, schema in tables.items()}
    problem = None
    try:
        schema = data_schema
        for i, step in enumerate(plan.steps):
            _check_step(step, schema, unit, tables)
            after = apply_steps(
                pl.LazyFrame(schema=schema), plan.steps[i : i + 1], unit=unit, tables=empty
            )
            schema = after.collect_schema()
        # Run the steps on no rows and on one row of nulls (public inputs, built from
        # the schema alone): whatever fails there fails for every input, before any
        # data is read (what could fail for some values only is refused above).
        apply_steps(pl.LazyFrame(schema=data_schema), plan.steps, unit=unit, tables=empty).collect()
        nulls = {name: _nulls(schema) for name, schema in tables.items()}
        apply_steps(_nulls(data_schema), plan.steps, unit=unit, tables=nulls).collect()
    except pl.exceptions.PolarsError as err:
        # Public inputs only (schemas, zero rows, a row of nulls): the message can be
        # shown, but it is raised outside the handler to carry no exception chain.
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        problem = f"{type(err).__name__}: {first}"
    if problem is not None:
        raise InvalidValueError(
            f"the query's filters, derived columns or joins do not fit the data's "
            f"columns: {problem}"
        )
    return schema


def _nulls(schema: pl.Schema) -> pl.LazyFrame:
    """One row of nulls with ``schema``: a public input."""
    return pl.LazyFrame([dict.fromkeys(schema)], schema=schema)


def _check_step(
    step: Step, schema: pl.Schema, unit: str | None, tables: Mapping[str, pl.Schema]
) -> None:
    """Refuse a step that does not fit the columns it reads (types, units, list columns)."""
    if isinstance(step, RowStep):
        for expr in step.exprs:
            check_types(expr, schema)
            if step.kind == "filter":
                _check_boolean(expr, schema)
        return
    if unit is None:
        raise InvalidValueError(
            f"{step.kind} works per privacy unit, and this session has none (each row is a "
            "unit); open the Session with privacy_unit=..."
        )
    if isinstance(step, PrivateJoin):
        if step.table not in tables:
            raise InvalidValueError(
                f"join_private: {step.table!r} is not a private table of this session"
            )
        if unit not in step.on:
            # The builder refuses it first; this is the check every plan passes.
            raise InvalidValueError(
                f"join_private keys {list(step.on)} leave out the privacy unit {unit!r}: a "
                "joined row would belong to two people"
            )
        right = schema_after(tables[step.table], unit, Plan(steps=step.steps), tables)
        for column in step.on:
            for side, names in (("left", schema), ("right", right)):
                if column not in names:
                    raise InvalidValueError(
                        f"join_private: the {side} side has no column {column!r} to join on; "
                        f"{columns_note(list(names))}"
                    )
            if schema[column] != right[column]:
                raise InvalidArgumentError(
                    f"join_private: column {column!r} is {schema[column]} on the left and "
                    f"{right[column]} on the right; cast one with with_columns first"
                )
    elif isinstance(step, FlatMap):
        if step.column not in schema:
            raise InvalidValueError(
                f"flat_map column {step.column!r} is not in the data; {columns_note(list(schema))}"
            )
        if not isinstance(schema[step.column], pl.List):
            raise InvalidArgumentError(
                f"flat_map needs a list column; {step.column!r} has type {schema[step.column]}"
            )
    elif isinstance(step, UnitColumns):
        for _, value in step.values:
            value.check(schema)
    else:
        missing = [c for c in step.by if c not in schema]
        if missing:
            raise InvalidValueError(
                f"per_unit column {missing[0]!r} is not in the data; {columns_note(list(schema))}"
            )
        for _, value in step.values:
            value.check(schema)
            if value.windowed_only:
                raise InvalidValueError(
                    f"{value.describe()} is a value per row: use it in with_columns, not per_unit"
                )


def _check_new_names(
    columns: list[str],
    unit: str | None,
    steps: tuple[Step, ...],
    tables: Mapping[str, pl.Schema],
) -> None:
    """Refuse a step that would replace a column it must not: the unit, or one of another case.

    A join may add no column of the data; with_columns may rewrite any column
    but the privacy unit's by its exact name. Neither may add a name that
    differs from another column's in case only (:mod:`privframe.engines.names`:
    Spark would take it for that column). Steps over units never write the
    unit column either.
    """
    for step in steps:
        if isinstance(step, PrivateJoin):
            right: list[str] = []
            if step.table in tables:
                # The right side as its own steps leave it.
                right = list(schema_after(tables[step.table], unit, Plan(steps=step.steps), tables))
            added = [c for c in right if c not in step.on]
            added = [f"{c}{step.suffix}" if c in columns else c for c in added]
            refuse_case_twins(added, columns, "join_private column", unit)
        elif isinstance(step, FlatMap):
            added = [step.name]
            if step.name not in (step.column, unit) and step.name in columns:
                raise InvalidValueError(
                    f"flat_map name={step.name!r} is already a column; choose another name"
                )
        elif isinstance(step, UnitColumns | PerUnit):
            added = [name for name, _ in step.values]
            if isinstance(step, PerUnit):
                clash = sorted({*step.by, *([unit] if unit else [])} & set(added))
                if clash:
                    raise InvalidValueError(
                        f"per_unit would name a value {clash[0]!r} like its unit or by column; "
                        "choose another name"
                    )
                columns = [*([unit] if unit else []), *step.by]
        elif step.kind == "join" and step.table is not None:
            added = [c for c in step.table.columns if c not in step.on]
            clash = sorted(set(added) & set(columns))
            if clash:
                raise InvalidValueError(
                    f"the public table's columns {clash} already exist in the data; "
                    "rename them before joining"
                )
            refuse_case_twins(added, columns, "the public table's column", unit)
        elif step.kind == "with_columns":
            outputs = (e.meta.output_name(raise_if_undetermined=False) for e in step.exprs)
            added = [name for name in outputs if name is not None]
        else:
            continue
        if unit is not None and unit in added:
            raise InvalidValueError(
                f"{step.kind} may not rewrite the privacy unit column "
                f"{unit!r}: bounding is per unit, and a rewritten unit could "
                "split one person into many"
            )
        if isinstance(step, RowStep) and step.kind == "with_columns":
            refuse_case_twins(added, columns, "with_columns column", unit)
        elif not isinstance(step, RowStep | PrivateJoin):
            refuse_case_twins(
                [a for a in added if a not in columns], columns, f"{step.kind} column", unit
            )
        columns = columns + [name for name in dict.fromkeys(added) if name not in columns]


def validate(
    data_schema: pl.Schema,
    unit: str | None,
    plan: Plan,
    tables: Mapping[str, pl.Schema] | None = None,
) -> pl.Schema:
    """Check the plan against the columns it will see; return that schema.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.api.schema import validate
        >>> from privframe.plan.ir import Plan
        >>> validate(pl.Schema({"x": pl.Int64}), None, Plan(aggregates=(pf.sum("y", (0, 1)),)))
        Traceback (most recent call last):
        ...
        privframe.errors.InvalidValueError: sum column 'y' is not in the data; ...
    """
    if plan.bounds_share is not None and plan.aggregates and not auto_bounds.asks(plan):
        raise InvalidValueError(
            'bounds_share is the share of a release spent choosing bounds="auto", and no '
            "aggregate of this query has them: remove bounds_share, or give an aggregate "
            'bounds="auto"'
        )
    schema = schema_after(data_schema, unit, plan, tables)
    copies = _unit_copies(unit, plan)
    used = (*plan.group_by, *(c for a in plan.aggregates for c in a.columns))
    internal = sorted({c for c in (*used, unit or "") if c.startswith("__")})
    if internal:
        raise InvalidValueError(
            f"columns {internal} start with '__', which privframe reserves for its own "
            "working columns; rename them"
        )
    for agg in plan.aggregates:
        for column in agg.columns:
            if column not in schema:
                raise InvalidValueError(
                    f"{type(agg).__name__.lower()} column {column!r} is not in the data; "
                    f"{columns_note(list(schema))}"
                )
            if not schema[column].is_numeric():
                raise InvalidArgumentError(
                    f"{type(agg).__name__.lower()} needs a numeric column; {column!r} "
                    f"has type {schema[column]}{_declare_note(column, schema[column])}"
                )
    for column in plan.group_by:
        if column not in schema:
            raise InvalidValueError(
                f"group_by column {column!r} is not in the data; {columns_note(list(schema))}"
            )
        if column == unit:
            raise InvalidValueError(
                f"group_by column {column!r} is the privacy unit column; group by another "
                "column (per-unit results are not what a private group-by releases)"
            )
        if column in copies:
            raise InvalidValueError(
                f"group_by column {column!r} is computed from the privacy unit column "
                f"{unit!r} alone; group by another column (per-unit results are not what a "
                "private group-by releases)"
            )
    if plan.other is not None and schema[plan.group_by[0]] != pl.String:
        raise InvalidArgumentError(
            f"other= needs a string key column; {plan.group_by[0]!r} has type "
            f"{schema[plan.group_by[0]]}"
        )
    for agg in plan.aggregates:
        if agg.output_name in plan.group_by:
            raise InvalidValueError(
                f"aggregate output {agg.output_name!r} has the name of a group_by column; "
                "give it another .alias(...)"
            )
    if plan.keys is not None:
        exact_keys(plan.keys.to_polars(), schema)
    return schema


def error_column_clashes(plan: Plan) -> list[tuple[str, str]]:
    """(column, output) of each error column ``with_error=True`` adds under a name already taken.

    The error and interval columns of the aggregate ``output`` that would have
    the name of an output or a group_by column, sorted.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.schema import error_column_clashes
        >>> from privframe.plan.ir import Plan
        >>> aggregates = (pf.count().alias("n"), pf.sum("x", (0, 1)).alias("n_std"))
        >>> error_column_clashes(Plan(aggregates=aggregates))
        [('n_std', 'n')]
    """
    taken = {*(agg.output_name for agg in plan.aggregates), *plan.group_by}
    return sorted(
        (column, agg.output_name)
        for agg in plan.aggregates
        for column in (*agg.error_columns(), *agg.interval_columns())
        if column in taken
    )


def _declare_note(column: str, dtype: pl.DataType) -> str:
    """How to give a text column a number type: a CSV's columns are text unless declared."""
    if dtype != pl.String:
        return ""
    return (
        f". A CSV's columns are read as text unless their type is declared: declare it in "
        f"the metadata, e.g. metadata={{{column!r}: pf.Column(type='float64')}}, or "
        f'metadata.{column} = {{ type = "float64" }} in a report spec or server config'
    )


def _unit_copies(unit: str | None, plan: Plan) -> set[str]:
    """The derived columns computed from the privacy unit column alone (``uid = user_id``).

    Grouping by one is grouping by the unit under another name, or by a
    function of it: per-unit results, which the unit's own name is refused for.
    A per-person value that picks one of the unit's own values of such a
    column (``pf.unit.min("user_id")``, ``first``, ...) is one too.
    """
    copies: set[str] = set()
    if unit is None:
        return copies
    for step in plan.steps:
        if isinstance(step, PrivateJoin):
            # The right side's copies arrive under their name, or with the suffix where
            # this side has the name too: both count (refusing at worst a twin name).
            right = _unit_copies(unit, Plan(steps=step.steps)) - set(step.on)
            copies |= right | {f"{name}{step.suffix}" for name in right}
        if isinstance(step, UnitColumns | PerUnit):
            if isinstance(step, PerUnit):
                copies &= set(step.by)
            for added, value in step.values:
                picked = value.kind in ("min", "max", "first", "last")
                if picked and value.column in {unit, *copies}:
                    copies.add(added)
                else:
                    copies.discard(added)
        for expr in step.exprs if isinstance(step, RowStep) and step.kind == "with_columns" else ():
            name = expr.meta.output_name(raise_if_undetermined=False)
            roots = set(expr.meta.root_names())
            if name is not None and roots and roots <= {unit, *copies}:
                copies.add(name)
            elif name is not None:
                copies.discard(name)
    return copies


def _check_boolean(predicate: pl.Expr, schema: pl.Schema) -> None:
    """A filter must be a boolean expression: polars may skip a non-boolean one on no rows."""
    dtype = pl.LazyFrame(schema=schema).select(predicate.alias("__p")).collect_schema()["__p"]
    if dtype != pl.Boolean:
        raise InvalidValueError(f"a filter must be a Boolean expression; this one is {dtype}")


def public_table(table: object) -> pl.DataFrame:
    """A public table to join (or to name in SQL), as a polars frame of plain types.

    Example:
        >>> import pandas as pd
        >>> from privframe.api.schema import public_table
        >>> public_table(pd.DataFrame({"zone": ["a"], "rate": [1.5]})).columns
        ['zone', 'rate']
    """
    if isinstance(table, pl.DataFrame):
        return plain_types(table.lazy()).collect()
    if isinstance(table, pd.DataFrame):
        failure = None
        try:
            return plain_types(pl.from_pandas(table).lazy()).collect()
        except Exception as err:  # the table is public: its converter's message is fine
            failure = str(err)
        raise InvalidArgumentError(f"could not convert the public table: {failure}")
    raise InvalidArgumentError(
        f"join takes a public pandas or polars DataFrame, got {type(table).__name__}"
    )
