"""GROUP BY: the group columns of a SELECT, and whether their keys are public.

A GROUP BY whose columns all have ``keys`` in metadata uses their product as
public keys; one whose columns have none chooses its groups privately, which
spends δ, so its release needs ``delta=`` (the δ to spend) and is refused
without it. A mix uses the product of the keyed columns' keys as public keys
over those columns and chooses the combinations of the others privately
(``Query.group_by`` with keys over some of its columns): it spends δ as a
plain private selection does, so it too needs ``delta=``. Rows whose keyed
columns are not public keys are dropped, and each chosen combination gets a
row for every public key.

Example:
    >>> import sqlglot
    >>> import privframe as pf
    >>> from privframe.api.sql.groups import group_by, public_keys
    >>> from privframe.api.sql.scope import Scope
    >>> text = "SELECT r, COUNT(*) FROM data GROUP BY 1"
    >>> scope = Scope(text, ["r"], {}, {"r": pf.Column(keys=["a", "b"])})
    >>> select = sqlglot.parse_one(text)
    >>> groups = group_by(select, scope)
    >>> list(groups)
    ['r']
    >>> keys, refusal = public_keys(select, groups, scope)
    >>> len(keys), refusal
    (2, None)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlglot import exp

from privframe.api.sql._common import (
    identifier,
    lookup,
    only,
    position_number,
    refuse,
    resolve,
    unsupported,
)
from privframe.api.sql.scope import Scope
from privframe.errors import SQLError
from privframe.plan.keys import KeySet, product


def group_by(
    select: exp.Select, scope: Scope, fits: Callable[[str, exp.Expr], None] | None = None
) -> dict[str, exp.Expr]:
    """Group output names and their canonical row expressions, in GROUP BY order.

    A group expression that is not a column becomes a derived column of
    ``scope``, named after the select-list alias that spells it, else
    ``group_<n>``. ``fits(name, item)``, if given, is called with each
    group's name and its GROUP BY item as written, to refuse it there.
    """
    group = select.args.get("group")
    if group is None:
        return {}
    only(group, {"expressions"}, "GROUP BY")
    items = select.expressions
    # GROUP BY a name means a select-list alias only when no column has that name
    # (a data column wins, as in SQL), and never an aggregate's alias.
    aliased = {i.alias: i.this for i in items if isinstance(i, exp.Alias)}
    groups: dict[str, exp.Expr] = {}
    for item in group.expressions:
        node = _grouped(item, items, aliased, scope)
        if isinstance(node, exp.Column):
            name = scope.column(node)
            groups[name] = scope.canonical(node)
        elif node.find(exp.AggFunc) is not None:
            raise unsupported(node, "GROUP BY an aggregate")
        else:
            canonical = scope.canonical(node)
            name = next(
                (
                    a
                    for a, e in aliased.items()
                    if e.find(exp.AggFunc) is None and scope.canonical(e) == canonical
                ),
                f"group_{len(groups) + 1}",
            )
            name = scope.derive(scope.rows(node), name)
            groups[name] = canonical
        if fits is not None:
            fits(name, item)
    return groups


def _grouped(
    node: exp.Expr,
    items: list[exp.Expr],
    aliased: Mapping[str, exp.Expr],
    scope: Scope,
) -> exp.Expr:
    """The expression a GROUP BY item groups by: a position or an alias becomes its item."""
    if isinstance(node, exp.Literal) and not node.is_string:
        index = position_number(node, "GROUP BY")
        if not 1 <= index <= len(items):
            raise unsupported(node, f"GROUP BY {index}", "no such select-list position")
        node = items[index - 1]
        node = node.this if isinstance(node, exp.Alias) else node
    if (
        isinstance(node, exp.Column)
        and not node.table
        and not lookup(*identifier(node), scope.available())
    ):
        where = "in the data, the joined tables or the select list's aliases"
        alias = resolve(node, [*scope.available(), *aliased], where)
        if aliased[alias].find(exp.AggFunc) is not None:
            raise unsupported(node, "GROUP BY an aggregate", f"{alias!r} names an aggregate")
        node = aliased[alias]
    return node


def public_keys(
    select: exp.Select, groups: Mapping[str, exp.Expr], scope: Scope
) -> tuple[KeySet | None, SQLError | None]:
    """The public keys of the groups, and the refusal a release without delta= gets.

    The keys are None when no group column has any; the refusal is None when
    every group column has keys. Group columns without public keys are chosen
    privately, which spends δ: the refusal is kept, not raised, so that
    ``explain`` still works and a release with ``delta=`` goes ahead.
    """
    clause = select.args["group"]
    given = {name: group_keys(name, clause, scope) for name in groups}
    keyed = {name: keys for name, keys in given.items() if keys is not None}
    if len(keyed) == len(groups):
        return product(**keyed), None
    unkeyed = {n: e for n, e in groups.items() if n not in keyed}
    named = ", ".join(
        repr(n) if isinstance(e, exp.Column) else f"{n!r} ({e.sql()})" for n, e in unkeyed.items()
    )
    chosen = "the combinations of those columns" if keyed else "its groups"
    return product(**keyed) if keyed else None, refuse(
        clause,
        "GROUP BY",
        f"GROUP BY has no public keys for {named}, so {chosen} would be chosen privately "
        "from the data, which spends delta as well as rho. Give "
        f"the keys in metadata, e.g. metadata={{{next(iter(unkeyed))!r}: "
        "pf.Column(keys=[...])}, which spends no delta; or opt into private "
        "selection with delta= on the call, e.g. sess.sql(text, rho=..., delta=...) "
        "or .release(rho, delta=...) (epsilon=... instead of rho in an (epsilon, delta) "
        "session), which spends that delta (a share of the budget's). Nothing was charged",
    )


def group_keys(name: str, node: exp.Expr, scope: Scope) -> list[Any] | None:
    """The public keys of the group column ``name``, or None if its metadata gives none.

    ``node`` asks for them, where a refusal of the metadata is located.

    Example:
        >>> import sqlglot
        >>> import privframe as pf
        >>> from privframe.api.sql.groups import group_keys
        >>> from privframe.api.sql.scope import Scope
        >>> scope = Scope("", ["r"], {}, {"r": pf.Column(keys=["a", "b"])})
        >>> group_keys("r", sqlglot.parse_one("r"), scope)
        ['a', 'b']
    """
    column = scope.metadata(name, node)
    return None if column is None or column.keys is None else list(column.keys)
