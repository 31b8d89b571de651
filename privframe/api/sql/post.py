"""The released table's post-processing: select-list expressions, HAVING, ORDER BY, LIMIT/OFFSET.

They cost nothing and see only released values (Dwork & Roth 2014, Prop.
2.1): expressions over the released columns
(:mod:`~privframe.api.sql.released`), where an aggregate call names the
released column measuring it (:mod:`~privframe.api.sql.select_list` measures
every one, hidden when the select list lacks it). HAVING and ORDER BY see the
select list's names (an alias hides a group column of the same name) and the
group columns.

Error columns (``with_error=True``, ``intervals=True``): a group column and an
aggregate have their own. An expression has them only where they are exact:
``a · aggregate + b`` with literal ``a ≠ 0`` and ``b`` (``COUNT(*) * 5``,
``AVG(x) + 3``, ``SUM(x) / 10``) has the aggregate's ``_std`` and ``_ci95``
times ``|a|``, its interval's ends mapped through ``a · v + b``, and its
``_rank_ci95`` (ranks do not change under such a map). Any other expression
(``SUM(a) / COUNT(*)``, ``ROUND(AVG(x), 1)``) has none: its error is not a
fixed multiple of one measurement's.

Example:
    >>> import polars as pl
    >>> import sqlglot
    >>> from privframe.api.sql.post import post_processing
    >>> from privframe.api.sql.select_list import Item, named_at
    >>> select = sqlglot.parse_one("SELECT r FROM data GROUP BY r ORDER BY r DESC LIMIT 1")
    >>> post = post_processing(select, [Item("r", select.expressions[0], None, "r")], ["r"],
    ...     lambda node: node, None)
    >>> post.finish(pl.DataFrame({"r": ["a", "b"]}), with_error=False)["r"].to_list()
    ['b']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl
from sqlglot import exp

from privframe.api.sql._common import (
    literal_value,
    located,
    only,
    position_number,
    refuse_at,
    resolve,
    unsupported,
    whole_number,
)
from privframe.api.sql.released import Affine, Released, Requirement, affine
from privframe.api.sql.select_list import Item, named_at
from privframe.errors import SQLError
from privframe.plan.aggregates.base import (
    CI95_SUFFIX,
    ERROR_SUFFIXES,
    HIGH_SUFFIX,
    LOW_SUFFIX,
    RANK_CI95_SUFFIX,
    STD_SUFFIX,
)

__all__ = ["ERROR_SUFFIXES", "Derived", "Post", "post_processing"]


@dataclass(frozen=True)
class Derived:
    """A select-list expression, computed on the released table; ``affine`` gives its errors.

    ``position`` is where it is written, for the refusal of its error columns.
    """

    name: str
    expr: pl.Expr
    affine: Affine | None
    position: tuple[int, int] | None = None

    def error_columns(self, columns: Sequence[str]) -> list[pl.Expr]:
        """Its error columns, from those of its aggregate among ``columns`` (exact ones only)."""
        if self.affine is None:
            return []
        source, a, b = self.affine.source, self.affine.a, self.affine.b
        scaled = {STD_SUFFIX: abs(a), CI95_SUFFIX: abs(a), RANK_CI95_SUFFIX: 1.0}
        ends = {LOW_SUFFIX: LOW_SUFFIX, HIGH_SUFFIX: HIGH_SUFFIX}
        if a < 0:  # a decreasing map swaps the interval's ends
            ends = {LOW_SUFFIX: HIGH_SUFFIX, HIGH_SUFFIX: LOW_SUFFIX}
        made = [
            (pl.col(source + suffix) * factor).alias(self.name + suffix)
            for suffix, factor in scaled.items()
            if source + suffix in columns
        ]
        made += [
            (pl.col(source + end) * a + b).alias(self.name + suffix)
            for suffix, end in ends.items()
            if source + end in columns
        ]
        return made


@dataclass(frozen=True)
class Post:
    """What happens to the released table: outputs, HAVING, ORDER BY, LIMIT/OFFSET, selection.

    Attributes:
        copies: (group column, select-list name) of group columns selected under an alias.
        derived: the select list's expressions.
        columns: the select list's output names, in order.
        having: the HAVING condition, over released columns.
        order: (key, descending, nulls last) of each ORDER BY item.
        limit: the LIMIT, if any.
        offset: the OFFSET, if any.
        notes: what ``explain`` says about the post-processing.
        selection: for a GROUP BY without public keys, the refusal a release
            without ``delta=`` gets: (message, position).
        requirements: the types the select list's expressions need of the
            released table, then those HAVING and ORDER BY need of it with them.
        positions: where the select list's first expression, HAVING and ORDER
            BY are written, to locate a refusal of one of them.
        named: where each of ``columns`` is named (its alias, else its item),
            to locate a refusal of the name.
    """

    copies: tuple[tuple[str, str], ...]
    derived: tuple[Derived, ...]
    columns: tuple[str, ...]
    having: pl.Expr | None
    order: tuple[tuple[pl.Expr, bool, bool], ...]
    limit: int | None
    offset: int | None
    notes: tuple[str, ...]
    selection: tuple[str, tuple[int, int] | None] | None
    requirements: tuple[tuple[Requirement, ...], tuple[Requirement, ...]] = ((), ())
    positions: tuple[tuple[int, int] | None, ...] = (None, None, None)
    named: tuple[tuple[int, int] | None, ...] = ()

    def finish(self, frame: pl.DataFrame, with_error: bool) -> pl.DataFrame:
        """``frame`` with the select list's columns, after HAVING, ORDER BY and LIMIT.

        Raises:
            SQLError: an expression does not fit the released columns' types
                (checked on the schema first, so no polars error reaches the user).
        """
        frame = self._outputs(frame)
        for requirement in self.requirements[1]:
            requirement.check(frame.lazy())
        if self.having is not None:
            # Checked true/false or NULL (HAVING NULL keeps no row); polars filters on booleans.
            frame = frame.filter(self.having.cast(pl.Boolean))
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

    def failing(self, frames: Sequence[pl.DataFrame], with_error: bool) -> tuple[int, int] | None:
        """Where :meth:`finish` fails on ``frames`` (made-up, public values).

        At the first part that fails alone: the select list's expressions,
        HAVING, then ORDER BY.

        Example:
            >>> import polars as pl
            >>> from privframe.api.sql.post import Post
            >>> post = Post((), (), ("n",), pl.col("n").str.len_chars() > 1, (), None, None, (),
            ...             None, positions=(None, (1, 40), None))
            >>> post.failing([pl.DataFrame({"n": [0]})], with_error=False)
            (1, 40)
        """
        parts = [
            dataclasses.replace(self, having=None, order=()),
            dataclasses.replace(self, order=()),
        ]
        for part, where in zip(parts, self.positions, strict=False):
            try:
                for frame in frames:
                    part.finish(frame, with_error)
            except pl.exceptions.PolarsError:
                return where
        return self.positions[2]

    def _outputs(self, frame: pl.DataFrame) -> pl.DataFrame:
        """``frame`` with the group columns' copies and the select list's expressions."""
        for requirement in self.requirements[0]:
            requirement.check(frame.lazy())
        outputs = [pl.col(group).alias(name) for group, name in self.copies]
        outputs += [d.expr.alias(d.name) for d in self.derived]
        placed = [(e, d.position) for d in self.derived for e in d.error_columns(frame.columns)]
        names = frame.columns
        clash = [(e.meta.output_name(), at) for e, at in placed if e.meta.output_name() in names]
        if clash:  # error columns are released only with with_error= or intervals=
            (name, where), *_ = clash
            raise refuse_at(
                where,
                "with_error",
                f"the error column {name!r} of an expression would replace the released "
                "column of that name: alias one of them",
            )
        return frame.with_columns(*outputs, *(e for e, _ in placed))


def post_processing(
    select: exp.Select,
    items: list[Item],
    groups: Sequence[str],
    canonical: Callable[[exp.Expr], exp.Expr],
    selection: SQLError | None,
) -> Post:
    """The post-processing of ``select``, whose released columns are ``items``.

    ``canonical`` spells an expression's columns as the columns they name
    (:meth:`~privframe.api.sql.scope.Scope.canonical`); ``selection`` is the
    refusal kept for a GROUP BY without public keys.
    """
    by_sql = {canonical(i.node).sql(): i.name for i in items if i.aggregate is not None}
    shown = [item for item in items if not item.hidden]
    # A select-list expression reads group columns (select_items checked them) and aggregates.
    computed = Released(lambda column: canonical(column).name, by_sql, canonical)
    derived = tuple(
        Derived(
            i.name,
            computed.require(i.node, "the select list"),
            affine(i.node, computed.column_of),
            located(i.node),
        )
        for i in shown
        if i.aggregate is None and i.group is None
    )
    outputs = _Outputs(shown, groups, by_sql, canonical)
    having = select.args.get("having")
    order = select.args.get("order")
    _refuse_modifiers(select)
    limit, offset = select.args.get("limit"), select.args.get("offset")
    return Post(
        copies=tuple((i.group, i.name) for i in shown if i.group is not None and i.group != i.name),
        derived=derived,
        columns=tuple(item.name for item in shown),
        having=None if having is None else outputs.require(having.this, "HAVING", boolean=True),
        order=() if order is None else tuple(outputs.ordering(o) for o in order.expressions),
        limit=None if limit is None else _count_of(limit.expression, "LIMIT"),
        offset=None if offset is None else _count_of(offset.expression, "OFFSET"),
        notes=_notes(select, items, derived),
        # Private selection needs delta= on the call: the refusal, kept for release.
        selection=None if selection is None else (str(selection), selection.position),
        requirements=(tuple(computed.requirements), tuple(outputs.requirements)),
        positions=(
            derived[0].position if derived else None,
            None if having is None else located(having.this),
            None if order is None else located(order.expressions[0]),
        ),
        named=tuple(located(named_at(written)) for written in select.expressions),
    )


def _refuse_modifiers(select: exp.Select) -> None:
    """Refuse what ORDER BY, LIMIT and OFFSET may carry that privframe does not translate."""
    order = select.args.get("order")
    if order is not None:
        only(order, {"expressions"}, "ORDER BY")
        for ordered in order.expressions:
            only(ordered, {"this", "desc", "nulls_first"}, "ORDER BY")
    for clause in (select.args.get("limit"), select.args.get("offset")):
        if clause is not None:
            only(clause, {"expression"}, clause.key.upper())


def _notes(select: exp.Select, items: list[Item], derived: tuple[Derived, ...]) -> tuple[str, ...]:
    """What ``explain`` says: hidden aggregates, computed columns, post-processing clauses."""
    notes = []
    hidden = [f"{i.name} = {i.node.sql()}" for i in items if i.hidden]
    if hidden:
        notes.append(
            f"measured for the select list's expressions, HAVING or ORDER BY, and not "
            f"returned: {', '.join(hidden)}"
        )
    if derived:
        sql = {i.name: i.node.sql() for i in items}
        computed = ", ".join(f"{d.name} = {sql[d.name]}" for d in derived)
        notes.append(
            f"computed from the released values (post-processing: no extra cost): {computed}"
        )
        bare = [d.name for d in derived if d.affine is None]
        if bare:
            notes.append(
                f"no error columns for {', '.join(bare)}: an expression has them only as an "
                "aggregate times a nonzero constant plus a constant (its error is then exactly "
                "a multiple of the aggregate's)"
            )
    clauses = (("HAVING", "having"), ("ORDER BY", "order"), ("LIMIT", "limit"))
    notes += [
        f"{clause} is applied to the noisy result (post-processing: no extra cost)"
        for clause, key in clauses
        if select.args.get(key) is not None
    ]
    return tuple(notes)


def _count_of(node: exp.Expr, clause: str) -> int:
    digits = isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()
    if digits:
        # A count beyond 64 bits is read, not refused: it keeps every row.
        value = whole_number(node.this)
        return 2**63 - 1 if value is None else value
    value = literal_value(node)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise unsupported(node, f"{clause} {node.sql()}", "use a non-negative integer literal")
    return min(value, 2**63 - 1)  # no table has more rows; polars takes at most this


class _Outputs(Released):
    """HAVING and ORDER BY: expressions over the select list's names and the group columns."""

    def __init__(
        self,
        items: list[Item],
        groups: Sequence[str],
        by_sql: dict[str, str],
        canonical: Callable[[exp.Expr], exp.Expr],
    ) -> None:
        super().__init__(self._released, by_sql, canonical)
        self._names = sorted({item.name for item in items} | set(groups))
        self._items = items

    def _released(self, node: exp.Column) -> str:
        return resolve(
            node,
            self._names,
            "in the released table",
            f"HAVING and ORDER BY see only the released columns {self._names}",
        )

    def ordering(self, node: exp.Ordered) -> tuple[pl.Expr, bool, bool]:
        """(key, descending, nulls last) of one ORDER BY item."""
        target = node.this
        desc, nulls_last = bool(node.args.get("desc")), not node.args.get("nulls_first")
        if isinstance(target, exp.Literal) and not target.is_string:
            index = position_number(target, "ORDER BY")
            if not 1 <= index <= len(self._items):
                raise unsupported(target, f"ORDER BY {index}", "no such select-list position")
            return pl.col(self._items[index - 1].name), desc, nulls_last
        key = self.require(target, "ORDER BY")
        if not key.meta.root_names():
            raise unsupported(
                target,
                f"ORDER BY the constant {target.sql()}",
                "order by a released column, an alias, an aggregate or a select-list position",
            )
        return key, desc, nulls_last
