"""Column names as engines compare them: Spark ignores case, polars does not.

Spark resolves a column name ignoring case unless ``spark.sql.caseSensitive``
is set (it is false by default): two names match when
``a.equalsIgnoreCase(b)`` (Spark's ``caseInsensitiveResolution`` in
``org.apache.spark.sql.catalyst.analysis``; Java's ``String.equalsIgnoreCase``
compares character by character, upper-cased and then lower-cased). So a new
column ``U`` that polars adds beside the column ``u`` replaces ``u`` on Spark,
and when ``u`` is the privacy unit column every row becomes its own unit,
unbinding a person's contribution. A query may therefore not add a column
whose name differs from another column's in case only; the same name exactly
is a documented rewrite (of a column other than the unit).

Example:
    >>> from privframe.engines.names import case_twin
    >>> case_twin("U", ["u", "x"]), case_twin("u", ["u", "x"]), case_twin("y", ["u"])
    ('u', None, None)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from privframe.errors import InvalidValueError

__all__ = ["case_twin", "refuse_case_twins", "same_ignoring_case"]


def same_ignoring_case(a: str, b: str) -> bool:
    """Whether an engine that ignores case could take ``a`` for ``b``.

    True when Python's case folding or Java's ``equalsIgnoreCase`` (which
    Spark uses) identifies them: either is enough, so the check errs towards
    seeing a match (``"ı"`` and ``"i"`` match in Java, ``"ß"`` and ``"ss"``
    in Python).

    Example:
        >>> from privframe.engines.names import same_ignoring_case
        >>> same_ignoring_case("Region", "REGION"), same_ignoring_case("ı", "i")
        (True, True)
        >>> same_ignoring_case("region", "regions")
        False
    """
    return a.casefold() == b.casefold() or _java_fold(a) == _java_fold(b)


def _java_fold(name: str) -> str:
    """Each character upper-cased, then lower-cased, one character to one (as Java's)."""
    out = []
    for char in name:
        upper = char.upper()
        upper = upper if len(upper) == 1 else char
        lower = upper.lower()
        out.append(lower if len(lower) == 1 else upper)
    return "".join(out)


def case_twin(name: str, columns: Iterable[str]) -> str | None:
    """The first of ``columns`` that ``name`` matches ignoring case but not exactly, or None.

    Example:
        >>> from privframe.engines.names import case_twin
        >>> case_twin("Amount", ["amount"])
        'amount'
    """
    return next((c for c in columns if c != name and same_ignoring_case(c, name)), None)


def refuse_case_twins(
    added: Sequence[str], columns: Sequence[str], what: str, unit: str | None = None
) -> None:
    """Refuse a new column whose name differs from an existing or another new one only in case.

    ``added`` are the names a step adds (or rewrites), ``columns`` those before
    it, ``what`` says where the new names come from, e.g. ``"with_columns
    column"``. Column names are public schema, so the message names both.

    Example:
        >>> from privframe.engines.names import refuse_case_twins
        >>> refuse_case_twins(["U"], ["u", "t"], "with_columns column", unit="u")
        Traceback (most recent call last):
        ...
        privframe.errors.InvalidValueError: with_columns column 'U' differs from the column 'u' ...
    """
    for i, name in enumerate(added):
        twin = case_twin(name, (*columns, *added[:i]))
        if twin is not None:
            which = " (the privacy unit column)" if twin == unit else ""
            raise InvalidValueError(
                f"{what} {name!r} differs from the column {twin!r}{which} only in case: "
                f"an engine that matches names ignoring case (Spark) would replace "
                f"{twin!r} with it; give it a name that differs in more than case"
            )
