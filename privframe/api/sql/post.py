"""HAVING, ORDER BY and LIMIT/OFFSET: post-processing of the released (noisy) table.

They cost nothing and see only released values: HAVING and ORDER BY are
expressions over the released columns, an aggregate in them names the select
list's item with the same SQL.

Example:
    >>> import polars as pl
    >>> import sqlglot
    >>> from privframe.api.sql.post import post_processing
    >>> from privframe.api.sql.select_list import Item
    >>> select = sqlglot.parse_one("SELECT r FROM data GROUP BY r ORDER BY r DESC LIMIT 1")
    >>> post = post_processing(select, [Item("r", select.expressions[0], None, "r")], ["r"],
    ...     lambda node: node, None)
    >>> post.finish(pl.DataFrame({"r": ["a", "b"]}), with_error=False)["r"].to_list()
    ['b']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl
from sqlglot import exp

from privframe.api.sql._common import (
    literal_value,
    only,
    position_number,
    resolve,
    unsupported,
)
from privframe.api.sql.rows import Rows
from privframe.api.sql.select_list import Item
from privframe.errors import SQLError
from privframe.plan.aggregates.base import ERROR_SUFFIXES

"""The suffixes of the error columns ``with_error=True`` can add to an output column."""


@dataclass(frozen=True)
class Post:
    """What happens to the released table: copies, HAVING, ORDER BY, LIMIT/OFFSET, selection.

    Attributes:
        copies: (group column, select-list name) of group columns selected under an alias.
        columns: the select list's output names, in order.
        having: the HAVING condition, over released columns.
        order: (key, descending, nulls last) of each ORDER BY item.
        limit: the LIMIT, if any.
        offset: the OFFSET, if any.
        notes: what ``explain`` says about the post-processing.
        selection: for a GROUP BY without public keys, the refusal a release
            without ``delta=`` gets: (message, position, the group columns).
    """

    copies: tuple[tuple[str, str], ...]
    columns: tuple[str, ...]
    having: pl.Expr | None
    order: tuple[tuple[pl.Expr, bool, bool], ...]
    limit: int | None
    offset: int | None
    notes: tuple[str, ...]
    selection: tuple[str, tuple[int, int] | None, str] | None

    def finish(self, frame: pl.DataFrame, with_error: bool) -> pl.DataFrame:
        """``frame`` after HAVING, ORDER BY and LIMIT, with the select list's columns."""
        frame = frame.with_columns(pl.col(group).alias(name) for group, name in self.copies)
        if self.having is not None:
            frame = frame.filter(self.having)
        if self.order:
            exprs, descending, nulls_last = zip(*self.order, strict=True)
            frame = frame.sort(
                list(exprs),
                descending=list(descending),
                nulls_last=list(nulls_last),
                maintain_order=True,
            )
        if self.offset is not None or self.limit is not None:
            frame = frame.slice(self.offset or 0, self.limit)
        suffixes = ERROR_SUFFIXES if with_error else ()
        extra = [f"{c}{s}" for c in self.columns for s in suffixes if f"{c}{s}" in frame.columns]
        return frame.select(*self.columns, *extra)


def post_processing(
    select: exp.Select,
    items: list[Item],
    groups: Sequence[str],
    canonical: Callable[[exp.Expr], exp.Expr],
    selection: SQLError | None,
) -> Post:
    """The post-processing of ``select``, whose select list is ``items``.

    ``canonical`` spells an expression's columns as the columns they name
    (:meth:`~privframe.api.sql.scope.Scope.canonical`); ``selection`` is the
    refusal kept for a GROUP BY without public keys.
    """
    outputs = _Outputs(items, groups, canonical)
    having = select.args.get("having")
    order = select.args.get("order")
    if order is not None:
        only(order, {"expressions"}, "ORDER BY")
        for ordered in order.expressions:
            only(ordered, {"this", "desc", "nulls_first"}, "ORDER BY")
    limit = select.args.get("limit")
    offset = select.args.get("offset")
    for clause in (limit, offset):
        if clause is not None:
            only(clause, {"expression"}, clause.key.upper())
    return Post(
        copies=tuple((i.group, i.name) for i in items if i.group is not None and i.group != i.name),
        columns=tuple(item.name for item in items),
        having=None if having is None else outputs(having.this),
        order=() if order is None else tuple(outputs.ordering(o) for o in order.expressions),
        limit=None if limit is None else _count_of(limit.expression, "LIMIT"),
        offset=None if offset is None else _count_of(offset.expression, "OFFSET"),
        notes=tuple(
            f"{clause} is applied to the noisy result (post-processing: no extra cost)"
            for clause, node in (("HAVING", having), ("ORDER BY", order), ("LIMIT", limit))
            if node is not None
        ),
        # Private selection needs delta= on the call: the refusal, kept for release.
        selection=None
        if selection is None
        else (str(selection), selection.position, ", ".join(groups)),
    )


def _count_of(node: exp.Expr, clause: str) -> int:
    value = literal_value(node)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise unsupported(node, f"{clause} {node.sql()}", "use a non-negative integer literal")
    return min(value, 2**63 - 1)  # no table has more rows; polars takes at most this


class _Outputs(Rows):
    """HAVING and ORDER BY: expressions over the released columns (aggregates by their SQL)."""

    def __init__(
        self,
        items: list[Item],
        groups: Sequence[str],
        canonical: Callable[[exp.Expr], exp.Expr],
    ) -> None:
        super().__init__(self._released)
        self._names = sorted({item.name for item in items} | set(groups))
        self._canonical = canonical
        self._by_sql = {canonical(i.node).sql(): i.name for i in items if i.aggregate}
        self._items = items

    def _released(self, node: exp.Column) -> str:
        return resolve(
            node,
            self._names,
            "in the released table",
            f"HAVING and ORDER BY see only the released columns {self._names}",
        )

    def __call__(self, node: exp.Expr) -> pl.Expr:
        if isinstance(node, exp.AggFunc | exp.WithinGroup):
            name = self._by_sql.get(self._canonical(node).sql())
            if name is None:
                raise unsupported(
                    node,
                    f"the aggregate {node.sql()} in HAVING or ORDER BY",
                    "it must also be in the select list (post-processing sees released values)",
                )
            return pl.col(name)
        return super().__call__(node)

    def ordering(self, node: exp.Ordered) -> tuple[pl.Expr, bool, bool]:
        """(key, descending, nulls last) of one ORDER BY item."""
        target = node.this
        desc, nulls_last = bool(node.args.get("desc")), not node.args.get("nulls_first")
        if isinstance(target, exp.Literal) and not target.is_string:
            index = position_number(target, "ORDER BY")
            if not 1 <= index <= len(self._items):
                raise unsupported(target, f"ORDER BY {index}", "no such select-list position")
            return pl.col(self._items[index - 1].name), desc, nulls_last
        return self(target), desc, nulls_last
