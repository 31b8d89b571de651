"""Reading TOML specs: typed values, each problem naming its key (report specs, server configs).

The readers take a parsed TOML table and the dotted path of the key being
read (``where``), and raise :class:`SpecError` naming that path: the report
spec (:mod:`privframe.api.report_spec`) and the server's configuration
(:mod:`privframe.api.server.config`) share them, so a file of either says
what is wrong in the same words.

Example:
    >>> from privframe.api.spec_values import spec_contributions
    >>> spec_contributions({"max_groups": 2, "max_rows_per_group": 5})
    {'max_groups': 2, 'max_rows_per_group': 5}
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from privframe.accounting.budgets import GDP, ApproxDP, Budget, PureDP, zCDP
from privframe.api.query import Bound
from privframe.api.sql.metadata import column_type
from privframe.engines.expressions import Bin, bin
from privframe.errors import InvalidValueError, PrivframeError
from privframe.plan import aggregates as agg
from privframe.plan.aggregates import Aggregate
from privframe.plan.aggregates.base import check_missing

__all__ = [
    "AGGREGATE_KINDS",
    "BUDGET_KEYS",
    "SpecError",
    "check_keys",
    "kind_of",
    "read_toml",
    "spec_bounds",
    "spec_budget",
    "spec_contributions",
    "spec_domains",
    "spec_finite",
    "spec_flag",
    "spec_guard",
    "spec_integer",
    "spec_metadata",
    "spec_names",
    "spec_number",
    "spec_positive",
    "spec_string",
    "spec_table",
    "spec_values",
]


_BOUNDED_KEYS = ("kind", "column", "bounds", "alias")
_SUMMED_KEYS = (*_BOUNDED_KEYS, "missing")
_Builder = Callable[..., Aggregate | tuple[Aggregate, ...]]
AGGREGATE_KINDS: dict[str, tuple[_Builder, tuple[str, ...]]] = {
    "count": (agg.count, ("kind", "alias")),
    "count_distinct": (agg.count_distinct, ("kind", "alias")),
    "sum": (agg.sum, _SUMMED_KEYS),
    "mean": (agg.mean, _SUMMED_KEYS),
    "var": (agg.var, _SUMMED_KEYS),
    "std": (agg.std, _SUMMED_KEYS),
    "quantile": (agg.quantile, (*_BOUNDED_KEYS, "q", "candidates")),
    "median": (agg.median, (*_BOUNDED_KEYS, "candidates")),
}
"""Per aggregate kind a spec names (each family's ``spec_name``, and ``median``): its public
constructor and the keys its table may hold, in a report spec's TOML and a plan's wire JSON."""

BUDGET_KEYS = ("rho", "delta", "epsilon", "selection_delta", "mu")
"""The keys a budget table may give (:func:`spec_budget`)."""


class SpecError(InvalidValueError):
    """A report spec is invalid, or one of its queries does not plan; nothing was spent."""


def spec_table(value: object, where: str) -> dict[str, Any]:
    """A TOML table (a dict), else :class:`SpecError`.

    Example:
        >>> from privframe.api.spec_values import spec_table
        >>> spec_table({"a": 1}, "data")
        {'a': 1}
    """
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be a table, got {kind_of(value)}")
    return value


def kind_of(value: object) -> str:
    """How a message names the TOML type of ``value``.

    Example:
        >>> from privframe.api.spec_values import kind_of
        >>> kind_of([1])
        'an array'
    """
    return {bool: "a boolean", str: "a string", list: "an array", dict: "a table"}.get(
        type(value), f"a {type(value).__name__}"
    )


def check_keys(
    table: Mapping[str, Any], where: str, allowed: Sequence[str], required: Sequence[str] = ()
) -> None:
    """Refuse a key of ``table`` not in ``allowed``, and a missing ``required`` one.

    Example:
        >>> from privframe.api.spec_values import check_keys
        >>> check_keys({"rho": 1.0}, "budget", ("rho", "delta"), ("rho",))
    """
    for key in table:
        if key not in allowed:
            raise SpecError(
                f"{where}: unknown key {key!r}; allowed keys: {', '.join(sorted(allowed))}"
            )
    for key in required:
        if key not in table:
            raise SpecError(f"{where}: missing the required key {key!r}")


def spec_string(table: Mapping[str, Any], key: str, where: str) -> str:
    """``table[key]`` as a non-empty string.

    Example:
        >>> from privframe.api.spec_values import spec_string
        >>> spec_string({"title": "Sales"}, "title", "report")
        'Sales'
    """
    value = table[key]
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where}.{key} must be a non-empty string, got {kind_of(value)}")
    return value


def spec_finite(value: object, where: str) -> float:
    """``value`` as a finite float (a TOML integer or float, never a boolean).

    Example:
        >>> from privframe.api.spec_values import spec_finite
        >>> spec_finite(2, "bounds[0]")
        2.0
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def spec_number(table: Mapping[str, Any], key: str, where: str) -> float:
    """``table[key]`` as a finite float.

    Example:
        >>> from privframe.api.spec_values import spec_number
        >>> spec_number({"delta": 1e-6}, "delta", "budget")
        1e-06
    """
    return spec_finite(table[key], f"{where}.{key}")


def spec_positive(table: Mapping[str, Any], key: str, where: str) -> float:
    """``table[key]`` as a finite float > 0.

    Example:
        >>> from privframe.api.spec_values import spec_positive
        >>> spec_positive({"rho": 0.5}, "rho", "budget")
        0.5
    """
    value = spec_number(table, key, where)
    if value <= 0:
        raise SpecError(f"{where}.{key} must be > 0, got {value!r}")
    return value


def spec_flag(table: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    """``table[key]`` as a boolean, ``default`` when absent.

    Example:
        >>> from privframe.api.spec_values import spec_flag
        >>> spec_flag({}, "total", "queries[0]", False)
        False
    """
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise SpecError(f"{where}.{key} must be true or false, got {value!r}")
    return value


def spec_integer(table: Mapping[str, Any], key: str, where: str) -> int:
    """``table[key]`` as a whole number (never a boolean).

    Example:
        >>> from privframe.api.spec_values import spec_integer
        >>> spec_integer({"max_groups": 3}, "max_groups", "contributions")
        3
    """
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where}.{key} must be a whole number, got {value!r}")
    return value


def spec_names(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    """``table[key]`` as a tuple of column names.

    Example:
        >>> from privframe.api.spec_values import spec_names
        >>> spec_names({"group_by": ["region"]}, "group_by", "queries[0]")
        ('region',)
    """
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SpecError(f"{where}.{key} must be an array of column names, got {value!r}")
    return tuple(value)


def spec_values(value: object, where: str) -> list[Any]:
    """A non-empty array of public key values: all strings, or all numbers.

    Example:
        >>> from privframe.api.spec_values import spec_values
        >>> spec_values(["north", "south"], "metadata.region.keys")
        ['north', 'south']
    """
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value)
    ):
        raise SpecError(f"{where} must be a non-empty array of strings or numbers")
    if len({isinstance(v, str) for v in value}) > 1:
        # The builder refuses mixed keys too: a cast would have to pick one reading.
        raise SpecError(f"{where} mixes strings and numbers; give all keys as one kind")
    return value


def spec_domains(value: object, where: str) -> dict[str, list[Any] | Bin]:
    """Public domains per column, for marginals and synthetic data: value lists or bins.

    A column's domain is an array of its values (:func:`spec_values`) or a
    table ``{bins = [e0, e1, ...], labels = [...]}`` (labels optional): the
    public edges of :func:`privframe.bin`.

    Example:
        >>> from privframe.api.spec_values import spec_domains
        >>> domains = spec_domains({"sex": ["f", "m"], "age": {"bins": [0, 18, 120]}}, "domains")
        >>> domains["sex"], domains["age"].keys
        (['f', 'm'], ['[0, 18)', '[18, 120]'])
    """
    table = spec_table(value, where)
    domains: dict[str, list[Any] | Bin] = {}
    for column, domain in table.items():
        at = f"{where}.{column}"
        if isinstance(domain, Mapping):
            check_keys(domain, at, ("bins", "labels"), ("bins",))
            edges = [
                spec_finite(e, f"{at}.bins") for e in spec_values(domain["bins"], f"{at}.bins")
            ]
            labels = domain.get("labels")
            if labels is not None and not (
                isinstance(labels, list) and all(isinstance(x, str) for x in labels)
            ):
                raise SpecError(f"{at}.labels must be an array of strings")
            domains[column] = spec_guard(at, partial(bin, column, edges, labels))
        else:
            domains[column] = spec_values(domain, at)
    return domains


def spec_guard(where: str, build: Callable[[], Any]) -> Any:
    """Run a privframe constructor, naming the spec key when it refuses the value."""
    try:
        return build()
    except PrivframeError as err:
        raise SpecError(f"{where}: {err}") from None


def spec_budget(
    table: Mapping[str, Any], where: str = "budget", also: Sequence[str] = ()
) -> Budget:
    """A budget table, read as the Session takes budgets.

    * ``epsilon`` alone: pure DP, ``PureDP(epsilon)``;
    * ``epsilon`` and ``delta``: (ε, δ)-DP spent as such, ``ApproxDP(epsilon, delta)``;
    * ``epsilon``, ``delta`` and ``selection_delta``: that (ε, δ) budget spent as
      zCDP, ``ApproxDP(epsilon, delta).to_zcdp(selection_delta=...)``;
    * ``rho`` (and optionally ``delta``): zCDP; ``mu``: Gaussian DP.

    ``also`` lists the other keys of ``table`` that the caller reads.

    Example:
        >>> from privframe.api.spec_values import spec_budget
        >>> spec_budget({"rho": 0.5})
        zCDP(rho=0.5, delta=0.0)
        >>> spec_budget({"epsilon": 1.0}), spec_budget({"epsilon": 1.0, "delta": 1e-6})
        (PureDP(epsilon=1.0), ApproxDP(epsilon=1.0, delta=1e-06))
    """
    check_keys(table, where, (*BUDGET_KEYS, *also))
    given = set(table) - set(also)
    if given in ({"rho"}, {"rho", "delta"}):
        rho = spec_positive(table, "rho", where)
        delta = spec_number(table, "delta", where) if "delta" in table else 0.0
        return spec_guard(where, lambda: zCDP(rho, delta))
    if given == {"epsilon"}:
        epsilon = spec_positive(table, "epsilon", where)
        return spec_guard(where, lambda: PureDP(epsilon))
    if given in ({"epsilon", "delta"}, {"epsilon", "delta", "selection_delta"}):
        epsilon, delta = spec_positive(table, "epsilon", where), spec_number(table, "delta", where)
        if "selection_delta" not in table:
            return spec_guard(where, lambda: ApproxDP(epsilon, delta))
        reserve = spec_number(table, "selection_delta", where)
        return spec_guard(where, lambda: ApproxDP(epsilon, delta).to_zcdp(selection_delta=reserve))
    if given == {"mu"}:
        return GDP(spec_positive(table, "mu", where))
    raise SpecError(
        f"{where}: give rho (and optionally delta) for zCDP, epsilon for pure DP, epsilon "
        "and delta for (epsilon, delta)-DP (and selection_delta to spend it as zCDP), or mu; "
        f"got {', '.join(sorted(given)) or 'none of them'}"
    )


def spec_bounds(value: object, where: str) -> tuple[float, float]:
    """``value`` as public bounds ``[lower, upper]``.

    Example:
        >>> from privframe.api.spec_values import spec_bounds
        >>> spec_bounds([0, 100], "metadata.amount.bounds")
        (0.0, 100.0)
    """
    if not isinstance(value, list) or len(value) != 2:
        raise SpecError(f"{where} must be [lower, upper], got {value!r}")
    return spec_finite(value[0], f"{where}[0]"), spec_finite(value[1], f"{where}[1]")


def spec_metadata(raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A ``[metadata]`` table: per column its public facts, checked.

    The facts are ``type``, ``bounds``, ``keys``, ``candidates`` and
    ``missing``. A ``type`` is kept as its name (one of
    :data:`~privframe.api.sql.metadata.TYPE_NAMES`), lower case.

    Example:
        >>> from privframe.api.spec_values import spec_metadata
        >>> spec_metadata({"amount": {"bounds": [0, 10], "type": "Int64"}})
        {'amount': {'type': 'int64', 'bounds': (0.0, 10.0)}}
    """
    columns: dict[str, dict[str, Any]] = {}
    for column, value in raw.items():
        where = f"metadata.{column}"
        table = spec_table(value, where)
        check_keys(table, where, ("type", "bounds", "keys", "candidates", "missing"))
        entry: dict[str, Any] = {}
        if "type" in table:
            name = spec_string(table, "type", where)
            spec_guard(f"{where}.type", partial(column_type, name))
            entry["type"] = name.lower()
        if "bounds" in table:
            entry["bounds"] = spec_bounds(table["bounds"], f"{where}.bounds")
        if "keys" in table:
            entry["keys"] = spec_values(table["keys"], f"{where}.keys")
        if "candidates" in table:
            entry["candidates"] = spec_integer(table, "candidates", where)
        if "missing" in table:
            check = partial(check_missing, "missing", table["missing"])
            entry["missing"] = spec_guard(where, check)
        columns[column] = entry
    return columns


def spec_contributions(table: Mapping[str, Any], where: str = "contributions") -> dict[str, int]:
    """A ``[contributions]`` table: the limits of :class:`~privframe.Bound`, checked.

    Example:
        >>> from privframe.api.spec_values import spec_contributions
        >>> spec_contributions({"max_rows": 4})
        {'max_rows': 4}
    """
    check_keys(table, where, ("max_groups", "max_rows_per_group", "max_rows"))
    limits = {key: spec_integer(table, key, where) for key in table}
    if "max_rows_per_group" not in limits and "max_rows" not in limits:
        raise SpecError(f"{where}: give max_rows_per_group or max_rows (a person's row limit)")
    spec_guard(where, lambda: Bound(**limits))
    return limits


def read_toml(path: Path, what: str = "the spec") -> dict[str, Any]:
    """The parsed TOML file at ``path``; ``what`` names it in errors.

    Example:
        >>> from privframe.api.spec_values import read_toml
        >>> from pathlib import Path
        >>> read_toml(Path("no-such.toml"), "the configuration")
        Traceback (most recent call last):
        privframe.api.spec_values.SpecError: cannot read the configuration 'no-such.toml': ...
    """
    try:
        # utf-8-sig: a spec saved by an editor that writes a byte-order mark reads too.
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as err:
        raise SpecError(f"cannot read {what} {str(path)!r}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{what} {str(path)!r} is not valid TOML: {err}") from None
