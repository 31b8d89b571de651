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

import pandas as pd
import polars as pl

from privframe.engines.expressions import check_types, plain_types
from privframe.engines.names import refuse_case_twins
from privframe.engines.spec import apply_steps
from privframe.errors import InvalidArgumentError, InvalidValueError, columns_note
from privframe.plan.ir import Plan
from privframe.plan.keys import exact_keys

__all__ = ["public_table", "schema_after", "validate"]


def schema_after(data_schema: pl.Schema, unit: str | None, plan: Plan) -> pl.Schema:
    """The columns and types the aggregation sees, from the data's schema alone (no data is read).

    Example:
        >>> import polars as pl
        >>> from privframe.api.schema import schema_after
        >>> from privframe.plan.ir import Plan
        >>> dict(schema_after(pl.Schema({"x": pl.Int64}), None, Plan()))
        {'x': Int64}
    """
    _check_new_names(list(data_schema), unit, plan)
    problem = None
    try:
        schema = data_schema
        for i, step in enumerate(plan.steps):
            for expr in step.exprs:
                check_types(expr, schema)
                if step.kind == "filter":
                    _check_boolean(expr, schema)
            after = apply_steps(pl.LazyFrame(schema=schema), plan.steps[i : i + 1])
            schema = after.collect_schema()
        # Run the steps on no rows and on one row of nulls (public inputs, built from
        # the schema alone): whatever fails there fails for every input, before any
        # data is read (what could fail for some values only is refused above).
        apply_steps(pl.LazyFrame(schema=data_schema), plan.steps).collect()
        nulls = pl.LazyFrame([dict.fromkeys(data_schema)], schema=data_schema)
        apply_steps(nulls, plan.steps).collect()
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


def _check_new_names(columns: list[str], unit: str | None, plan: Plan) -> None:
    """Refuse a step that would replace a column it must not: the unit, or one of another case.

    A join may add no column of the data; with_columns may rewrite any column
    but the privacy unit's by its exact name. Neither may add a name that
    differs from another column's in case only (:mod:`privframe.engines.names`:
    Spark would take it for that column).
    """
    for step in plan.steps:
        if step.kind == "join" and step.table is not None:
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
            if unit is not None and unit in added:
                raise InvalidValueError(
                    f"with_columns may not rewrite the privacy unit column "
                    f"{unit!r}: bounding is per unit, and a rewritten unit could "
                    "split one person into many"
                )
            refuse_case_twins(added, columns, "with_columns column", unit)
        else:
            continue
        columns += [name for name in dict.fromkeys(added) if name not in columns]


def validate(data_schema: pl.Schema, unit: str | None, plan: Plan) -> pl.Schema:
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
    schema = schema_after(data_schema, unit, plan)
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
    """
    copies: set[str] = set()
    if unit is None:
        return copies
    for step in plan.steps:
        for expr in step.exprs if step.kind == "with_columns" else ():
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
