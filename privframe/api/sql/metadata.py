"""The public facts about columns that SQL cannot say: bounds, keys, quantile candidates.

Bounds, keys and quantile grids come from the Session's ``metadata``
(``{"amount": pf.Column(bounds=(0, 1000))}``), keyed by column name, or by the
output alias for an aggregate of an expression; per-query ``metadata=``
entries override the session's.

Example:
    >>> import privframe as pf
    >>> from privframe.api.sql.metadata import entry
    >>> entry({"Amount": pf.Column(bounds=(0, 10))}, "amount").bounds
    (0, 10)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from privframe.api.sql._common import lookup
from privframe.errors import InvalidArgumentError, SQLError
from privframe.plan.aggregates.base import check_missing


@dataclass(frozen=True)
class Column:
    """Public facts about one column (or one aggregate's output) that SQL cannot say.

    Attributes:
        bounds: (lower, upper) clipping bounds for sums, means, variances and
            quantiles of this column.
        keys: the public keys when grouping by this column.
        candidates: the number of quantile candidates (default 1001).
        missing: what a null or NaN value does in sums, means and variances of
            this column: ``"midpoint"`` (the default), ``"drop"`` or a number
            (:func:`privframe.mean`).

    Example:
        >>> import privframe as pf
        >>> pf.Column(bounds=(0, 1000)).bounds
        (0, 1000)
    """

    bounds: tuple[float, float] | None = None
    keys: tuple[Any, ...] | None = None
    candidates: int | None = None
    missing: str | float | None = None

    def __post_init__(self) -> None:
        if self.bounds is not None:
            if not isinstance(self.bounds, tuple | list) or len(self.bounds) != 2:
                raise InvalidArgumentError(
                    f"Column bounds must be a (lower, upper) pair, got {self.bounds!r}"
                )
            object.__setattr__(self, "bounds", tuple(self.bounds))
        if self.keys is not None:
            if isinstance(self.keys, str) or not isinstance(self.keys, Sequence):
                raise InvalidArgumentError(f"Column keys must be a list, got {self.keys!r}")
            object.__setattr__(self, "keys", tuple(self.keys))
        if self.missing is not None:
            object.__setattr__(self, "missing", check_missing("Column", self.missing))


def entry(metadata: Mapping[str, Column], name: str) -> Column | None:
    """The metadata entry of a column or alias: its exact key, else one equal but for case.

    Metadata keys are Python strings, but SQL users expect SQL's name rules.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.sql.metadata import entry
        >>> entry({"x": pf.Column(keys=["a"])}, "y") is None
        True
    """
    if name in metadata:
        return metadata[name]
    found = lookup(name, False, metadata)
    if len(found) > 1:
        raise SQLError(
            f"metadata has keys {found} that differ only in case, and the query names "
            f"{name!r}: give one key for it, spelt as the column or alias",
            construct="metadata",
        )
    return metadata[found[0]] if found else None
