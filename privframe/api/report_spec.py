"""The report spec: a TOML file of queries, read and validated as a whole.

:func:`load_spec` reads a spec into a :class:`ReportSpec`; every problem
raises :class:`SpecError` naming its key, before any data is read or any
budget spent. ``docs/reports.md`` describes the format.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from privframe.api.report import load_spec
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "spec.toml").write_text('''
    ... [report]
    ... title = "Regions"
    ... [data]
    ... path = "data.parquet"
    ... privacy_unit = "user_id"
    ... [budget]
    ... rho = 1.0
    ... ledger = "ledger.sqlite"
    ... [contributions]
    ... max_groups = 2
    ... max_rows_per_group = 5
    ... [[queries]]
    ... name = "by_region"
    ... group_by = ["region"]
    ... keys = ["north", "south"]
    ... aggregates = [{kind = "count"}]
    ... rho = 0.1
    ... ''')
    >>> spec = load_spec(folder / "spec.toml")
    >>> spec.title, spec.queries[0].name, spec.queries[0].rho, spec.ledger.name
    ('Regions', 'by_region', Fraction(1, 10), 'ledger.sqlite')
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from privframe.accounting.budgets import ApproxDP, Budget, PureDP
from privframe.accounting.replay import METHODS
from privframe.api.spec_values import (
    AGGREGATE_KINDS,
    BUDGET_KEYS,
    SpecError,
    check_keys,
    kind_of,
    read_toml,
    spec_bounds,
    spec_budget,
    spec_contributions,
    spec_flag,
    spec_guard,
    spec_integer,
    spec_metadata,
    spec_names,
    spec_positive,
    spec_string,
    spec_table,
    spec_values,
)
from privframe.numeric import exact
from privframe.plan.aggregates import Aggregate
from privframe.plan.aggregates.base import AUTO
from privframe.plan.keys import KeySet, product
from privframe.plan.postprocess import PostProcessing

__all__ = ["QuerySpec", "ReportSpec", "SpecError", "Spending", "load_spec"]


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_POST_KEYS = ("clamp", "intervals", "total")
_QUERY_KEYS = ("name", "sql", "group_by", "keys", "aggregates", "rho", "epsilon", "share", "delta")


@dataclass(frozen=True)
class Spending:
    """How a report's queries spend, by the kind of its budget (as the Session spends it).

    Attributes:
        kind: ``"zcdp"`` (a zCDP or GDP budget, or a server's dataset spent
            in ρ), ``"pure"`` (``PureDP``), ``"approx"`` (``ApproxDP``) or
            ``"grant"`` (a server's dataset spent in ε: its grant says which).
        parameter: the budget parameter a query and ``[report]`` give: ``"rho"``
            (zCDP) or ``"epsilon"``.
        budget: the budget in words, for messages.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.report_spec import Spending
        >>> Spending.of(pf.PureDP(1.0)).parameter, Spending.of(pf.GDP(1.0)).parameter
        ('epsilon', 'rho')
    """

    kind: str
    parameter: str
    budget: str

    @classmethod
    def of(cls, budget: Budget | None, *, epsilon: bool = False) -> Spending:
        """How a report with ``budget`` spends.

        None is a server's dataset, whose grant decides: ``epsilon`` when the
        spec spends ε (kind ``"grant"``: the grant's, pure DP or (ε, δ), checked
        on connecting), else ρ.
        """
        if isinstance(budget, PureDP):
            return cls("pure", "epsilon", "pure DP ([budget] epsilon = ...)")
        if isinstance(budget, ApproxDP):
            return cls("approx", "epsilon", "(epsilon, delta)-DP ([budget] epsilon and delta)")
        if budget is None and epsilon:
            return cls("grant", "epsilon", "the server grant's (pure DP or (epsilon, delta))")
        if budget is None:
            return cls("zcdp", "rho", "the server grant's, in rho (zCDP)")
        return cls("zcdp", "rho", "zCDP")

    @property
    def other(self) -> str:
        """The budget parameter of the other kinds, which this report's tables refuse."""
        return "epsilon" if self.parameter == "rho" else "rho"

    def refuse_other(self, table: Mapping[str, Any], where: str) -> None:
        """Refuse the other kinds' parameter in ``table``, naming what to write instead."""
        if self.other in table:
            raise SpecError(
                f"{where}.{self.other}: this report's budget is {self.budget}, whose queries "
                f"spend {self.parameter}: write {self.parameter} = ... instead of {self.other}"
            )


@dataclass(frozen=True)
class QuerySpec:
    """One query of a report, resolved from its spec: either SQL or a structured query.

    Attributes:
        name: the query's name (its CSV file is ``<name>.csv``).
        rho: in a zCDP report, the ρ its release spends, exactly as written (a
            ``share`` is resolved against ``[report] rho`` exactly: ten shares
            of 0.1 spend the total); None in a pure-DP or (ε, δ) report.
        delta: in a zCDP report, the δ a private key selection spends (None:
            the session's default); in an (ε, δ) report, the δ the release
            spends (None: 0). A pure-DP report's queries spend none (None).
        sql: the SQL text, for a SQL query.
        group_by: the grouping columns, for a structured query.
        keys: the public keys (None: chosen privately, or no grouping).
        aggregates: the aggregates, for a structured query.
        post: the release's post-processing (``clamp``, ``intervals`` and
            ``total`` in the spec, as in ``Query.release``).
        epsilon: in a pure-DP or (ε, δ) report, the ε its release spends, exactly
            as written or as its ``share`` of ``[report] epsilon``; None in a zCDP report.

    Raises:
        SpecError: both ``rho`` and ``epsilon``, or neither.
    """

    name: str
    rho: Fraction | None
    delta: float | None = None
    sql: str | None = None
    group_by: tuple[str, ...] = ()
    keys: KeySet | None = None
    aggregates: tuple[Aggregate, ...] = ()
    post: PostProcessing = field(default_factory=PostProcessing)
    epsilon: Fraction | None = None

    def __post_init__(self) -> None:
        if (self.rho is None) == (self.epsilon is None):
            raise SpecError(f"query {self.name!r}: give its budget as rho or as epsilon, once")


@dataclass(frozen=True)
class ReportSpec:
    """A validated report spec; paths are resolved against the spec's directory.

    Attributes:
        path: the spec file.
        title: the report's title; ledger labels are ``<title>/<query name>``.
        metadata: per column, its public ``type``, ``bounds``, ``keys``, ``candidates``
            and ``missing`` rule.
        contributions: ``max_groups``, ``max_rows_per_group`` and ``max_rows``.
        queries: the queries, in order.
        data: the data file (``.parquet`` or ``.csv``); None for a server's dataset.
        privacy_unit: the column identifying a person; None for a server's dataset.
        budget: the ledger's total budget; None for a server's dataset.
        ledger: the SQLite ledger file; None for a server's dataset.
        dataset: ``[data] dataset``: the dataset of a privframe server the
            report runs on (``privframe report --server URL``), which keeps
            the budget and draws the noise; None for a local file.
        seed: a seed for the noise: the results are then NOT private (tests only).
        accounting: how the report states its guarantee: ``"zcdp"`` (default),
            ``"rdp"`` or ``"pld"`` (see :mod:`privframe.accounting.replay`); a
            pure-DP or (ε, δ) report states what its ledger charges (``"zcdp"``,
            the ledger's own accounting).
        allow_seeded_noise: the second key a ``seed`` needs; a seed without it
            is refused (:class:`SpecError`), so no spec line alone makes the
            noise non-private.
        same_data: ``[budget] same_data = true``: the ledger may record other
            columns (or another privacy unit) for what is the same data; see
            the Session's ``same_data``.
        spends_epsilon: a spec run on a server whose queries spend ``epsilon``:
            it needs a pure-DP or (ε, δ) grant (checked on connecting).

    Raises:
        SpecError: a ``seed`` without ``allow_seeded_noise=True``.
    """

    path: Path
    title: str
    metadata: Mapping[str, Mapping[str, Any]]
    contributions: Mapping[str, int]
    queries: tuple[QuerySpec, ...]
    data: Path | None = None
    privacy_unit: str | None = None
    budget: Budget | None = None
    ledger: Path | None = None
    dataset: str | None = None
    seed: int | None = None
    accounting: str = "zcdp"
    allow_seeded_noise: bool = False
    same_data: bool = False
    spends_epsilon: bool = False

    def __post_init__(self) -> None:
        if self.seed is not None and not self.allow_seeded_noise:
            raise SpecError(
                f"{str(self.path)!r} sets [report] seed: the noise would be reproducible and "
                "the results NOT differentially private. Seeds are for tests only: remove the "
                "line, or, for a test, run with --allow-seeded-noise (privframe report) or "
                "allow_seeded_noise=True (load_spec). Nothing was spent."
            )

    @property
    def spends_from(self) -> str:
        """Where the report's budget is, in words: its ledger file or the server's dataset.

        Example:
            >>> from pathlib import Path
            >>> from privframe.api.report_spec import ReportSpec
            >>> ReportSpec(Path("s.toml"), "t", {}, {}, (), dataset="sales").spends_from
            "your budget on the server's dataset 'sales'"
        """
        if self.dataset is not None:
            return f"your budget on the server's dataset {self.dataset!r}"
        return f"the ledger {str(self.ledger)!r}"

    @property
    def spending(self) -> Spending:
        """How the report's queries spend: by its budget's kind (a server's: by its queries).

        Example:
            >>> from pathlib import Path
            >>> import privframe as pf
            >>> from privframe.api.report_spec import ReportSpec
            >>> ReportSpec(Path("s.toml"), "t", {}, {}, (), budget=pf.PureDP(1.0)).spending.kind
            'pure'
        """
        return Spending.of(self.budget, epsilon=self.spends_epsilon)

    def label(self, query: QuerySpec) -> str:
        """The ledger label of a query's release."""
        return f"{self.title}/{query.name}"


def _post(table: Mapping[str, Any], where: str) -> PostProcessing:
    return PostProcessing(
        spec_flag(table, "clamp", where, True),
        spec_flag(table, "intervals", where, False),
        spec_flag(table, "total", where, False),
    )


def _aggregate(
    raw: object, where: str, metadata: Mapping[str, Mapping[str, Any]]
) -> tuple[Aggregate, ...]:
    table = spec_table(raw, where)
    check_keys(
        table, where, ("kind", "column", "bounds", "q", "candidates", "missing", "alias"), ("kind",)
    )
    kind = spec_string(table, "kind", where)
    if kind not in AGGREGATE_KINDS:
        raise SpecError(f"{where}.kind must be one of {', '.join(AGGREGATE_KINDS)}, got {kind!r}")
    build, allowed = AGGREGATE_KINDS[kind]
    where = f"{where} (kind = {kind!r})"
    check_keys(table, where, allowed, [k for k in ("column", "q") if k in allowed])
    args: list[Any] = []
    facts: Mapping[str, Any] = {}
    if "column" in allowed:
        column = spec_string(table, "column", where)
        facts = metadata.get(column, {})
        if table.get("bounds") == AUTO:
            raise SpecError(
                f'{where}: bounds = "auto" is for single releases: a report charges all its '
                "queries in one step, and automatic bounds spend their share before it. Give "
                "bounds = [lower, upper], e.g. as chosen by query.tune"
            )
        if "bounds" in table:
            bounds = spec_bounds(table["bounds"], f"{where}.bounds")
        elif "bounds" in facts:
            bounds = facts["bounds"]
        else:
            raise SpecError(f"{where}: give bounds = [lower, upper], or metadata.{column}.bounds")
        args = [column, table["q"], bounds] if "q" in allowed else [column, bounds]
    options: dict[str, Any] = {}
    if "candidates" in table:
        options["candidates"] = spec_integer(table, "candidates", where)
    elif "candidates" in allowed and "candidates" in facts:
        options["candidates"] = facts["candidates"]
    if "missing" in allowed and ("missing" in table or "missing" in facts):
        options["missing"] = table.get("missing", facts.get("missing"))
    built = spec_guard(where, lambda: build(*args, **options))
    aggregates = built if isinstance(built, tuple) else (built,)
    if "alias" in table:
        if len(aggregates) != 1:
            raise SpecError(f"{where}: alias needs a single output (q has several values)")
        alias = spec_string(table, "alias", where)
        aggregates = (spec_guard(where, lambda: aggregates[0].alias(alias)),)
    return aggregates


def _keys(
    table: Mapping[str, Any],
    group_by: tuple[str, ...],
    where: str,
    metadata: Mapping[str, Mapping[str, Any]],
) -> KeySet | None:
    """The public keys: per column from the query's ``keys`` or the metadata; None for neither.

    Group columns without keys are chosen privately (spending δ), those with
    keys are public: every public key is reported for each chosen combination.
    """
    given = table.get("keys", {})
    if isinstance(given, list):
        if len(group_by) != 1:
            raise SpecError(f"{where}.keys: with several group_by columns, give a table of arrays")
        given = {group_by[0]: given}
    given = spec_table(given, f"{where}.keys")
    check_keys(given, f"{where}.keys", group_by)
    per_column = {
        column: spec_values(given[column], f"{where}.keys.{column}")
        if column in given
        else metadata.get(column, {}).get("keys")
        for column in group_by
    }
    present = {c: values for c, values in per_column.items() if values is not None}
    if not present:
        return None  # chosen privately: the release spends δ
    return spec_guard(f"{where}.keys", lambda: product(**present))


def _query(
    raw: object,
    where: str,
    total: Fraction | None,
    metadata: Mapping[str, Mapping[str, Any]],
    spending: Spending,
) -> tuple[QuerySpec, Fraction | None]:
    """One query, and its share of ``[report] rho`` (or ``epsilon``) if it gave one."""
    table = spec_table(raw, where)
    check_keys(table, where, (*_QUERY_KEYS, *_POST_KEYS), ("name",))
    name = spec_string(table, "name", where)
    if not _NAME.fullmatch(name):
        raise SpecError(
            f"{where}.name {name!r} must be letters, digits, '_', '.' or '-' "
            "(it names the query's CSV file)"
        )
    where = f"{where} ({name!r})"
    amount, share = _query_budget(table, where, total, spending)
    rho, epsilon = (None, amount) if spending.parameter == "epsilon" else (amount, None)
    if "delta" in table and spending.kind == "pure":
        raise SpecError(
            f"{where}.delta: this report's budget is {spending.budget}, which spends no delta: "
            "remove it, or give [budget] delta = ... for an (epsilon, delta) budget"
        )
    delta = spec_positive(table, "delta", where) if "delta" in table else None
    structured = [k for k in ("group_by", "keys", "aggregates") if k in table]
    if "sql" in table:
        if structured:
            raise SpecError(
                f"{where}: give sql or a structured query (group_by, keys, aggregates), "
                f"not both; found sql and {structured[0]}"
            )
        sql = spec_string(table, "sql", where)
        post = _post(table, where)
        return QuerySpec(name, rho, delta, sql=sql, post=post, epsilon=epsilon), share
    if "aggregates" not in table:
        raise SpecError(f'{where}: give sql = "SELECT ..." or aggregates = [...]')
    group_by = spec_names(table, "group_by", where) if "group_by" in table else ()
    if "keys" in table and not group_by:
        raise SpecError(f"{where}.keys needs group_by")
    listed = table["aggregates"]
    if not isinstance(listed, list) or not listed:
        raise SpecError(f"{where}.aggregates must be a non-empty array of tables")
    aggregates = tuple(
        aggregate
        for i, item in enumerate(listed)
        for aggregate in _aggregate(item, f"{where}.aggregates[{i}]", metadata)
    )
    keys = _keys(table, group_by, where, metadata)
    unkeyed = [c for c in group_by if keys is None or c not in keys.columns]
    if unkeyed and spending.kind == "pure":
        raise SpecError(
            f"{where}: group_by columns {unkeyed} have no keys (in the query or the "
            "metadata): they would be chosen privately, which needs delta, and this report's "
            f"budget is {spending.budget}, which has none; give keys for every group column, "
            "or give [budget] delta = ... for an (epsilon, delta) budget"
        )
    # (A zCDP query without any keys defaults to all the delta left; _checked refuses that.)
    if unkeyed and delta is None and (keys is not None or spending.kind == "approx"):
        raise SpecError(
            f"{where}: group_by columns {unkeyed} have no keys (in the query or the "
            "metadata): they would be chosen privately, spending delta; give delta = ... "
            "to opt in, or keys for every group column"
        )
    post = _post(table, where)
    if post.total and not group_by:
        raise SpecError(f"{where}.total adds a row for all groups together: it needs group_by")
    built = QuerySpec(name, rho, delta, None, group_by, keys, aggregates, post, epsilon)
    return built, share


def _query_budget(
    table: Mapping[str, Any], where: str, total: Fraction | None, spending: Spending
) -> tuple[Fraction, Fraction | None]:
    """A query's exact ρ (or ε), from its own ``rho`` (``epsilon``) or its ``share`` of the total.

    Shares are exact: ten shares of 0.1 of ``[report] epsilon = 1`` spend 1.
    """
    name = spending.parameter
    spending.refuse_other(table, where)
    if (name in table) == ("share" in table):
        raise SpecError(f"{where}: give exactly one of {name} and share")
    if name in table:
        return exact(name, spec_positive(table, name, where)), None
    share = exact("share", spec_positive(table, "share", where))
    if total is None:
        raise SpecError(f"{where}.share needs a total: [report] {name} = ...")
    return share * total, share


_REPORT_KEYS = ("title", "rho", "epsilon", "seed", "accounting")


def _report(
    report: Mapping[str, Any], spending: Spending
) -> tuple[str, str, Fraction | None, int | None]:
    """The ``[report]`` table: its title, accounting method, total ρ (or ε) and seed."""
    check_keys(report, "report", _REPORT_KEYS, ("title",))
    title = spec_string(report, "title", "report")
    accounting = spec_string(report, "accounting", "report") if "accounting" in report else "zcdp"
    if accounting not in METHODS:
        raise SpecError(
            f"report: accounting must be one of {', '.join(METHODS)}, got {accounting!r}"
        )
    if accounting != "zcdp" and spending.kind != "zcdp":
        raise SpecError(
            f"report.accounting: this report's budget is {spending.budget}, and its page states "
            "what the ledger charges, in epsilon; rdp and pld restate a zCDP report's "
            f"releases: remove accounting = {accounting!r}"
        )
    spending.refuse_other(report, "report")
    name = spending.parameter
    total = exact(name, spec_positive(report, name, "report")) if name in report else None
    seed = spec_integer(report, "seed", "report") if "seed" in report else None
    return title, accounting, total, seed


def _queries(
    queries: object,
    total: Fraction | None,
    metadata: Mapping[str, Mapping[str, Any]],
    spending: Spending,
) -> tuple[QuerySpec, ...]:
    """The ``[[queries]]``: each valid, their names unique, their budget within the total."""
    if not isinstance(queries, list) or not queries:
        raise SpecError("queries must be a non-empty array of tables: [[queries]]")
    parsed = [_query(q, f"queries[{i}]", total, metadata, spending) for i, q in enumerate(queries)]
    names = [q.name for q, _ in parsed]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SpecError(f"queries: the names {repeated} are used twice; names must be unique")
    if total is not None:
        shares = sum((share for _, share in parsed if share is not None), Fraction(0))
        if shares > 1:
            raise SpecError(f"queries: the shares add up to {float(shares):g}, more than 1")
        name = spending.parameter
        asked = sum((q.rho or q.epsilon or Fraction(0) for q, _ in parsed), Fraction(0))
        if asked > total:
            raise SpecError(
                f"queries ask for {name} = {float(asked):.6g} in total, more than [report] "
                f"{name} = {float(total):g}"
            )
    return tuple(q for q, _ in parsed)


def load_spec(path: str | Path, *, allow_seeded_noise: bool = False) -> ReportSpec:
    """Read and validate a report spec (TOML); every problem names its key.

    The ``[budget]`` decides how the queries spend, as a Session's budget
    does: ``rho`` in a zCDP report, ``epsilon`` (and ``delta`` for an (ε, δ)
    budget) in a pure-DP or (ε, δ) one (``docs/reports.md``).

    Args:
        path: the spec file.
        allow_seeded_noise: accept a ``[report] seed``, which makes the
            results NOT private (for tests). Without it such a spec is refused.

    Raises:
        SpecError: the file is missing or not TOML, a key is unknown or
            missing, or a value has the wrong type or range (the budget
            parameter of another kind of budget, say); or it sets a seed
            without ``allow_seeded_noise``.
    """
    path = Path(path)
    raw = read_toml(path)
    check_keys(
        raw,
        "the spec",
        ("report", "data", "budget", "metadata", "contributions", "queries"),
        ("report", "data", "contributions", "queries"),
    )
    report = spec_table(raw["report"], "report")
    check_keys(report, "report", _REPORT_KEYS, ("title",))
    data = spec_table(raw["data"], "data")
    if "dataset" in data:
        source = _remote_source(raw, data, "seed" in report)
    else:
        source = _local_source(raw, data, path.parent)
    spending = Spending.of(source.get("budget"), epsilon=bool(source.get("spends_epsilon")))
    title, accounting, total, seed = _report(report, spending)
    contributions = spec_contributions(spec_table(raw["contributions"], "contributions"))
    metadata = spec_metadata(spec_table(raw.get("metadata", {}), "metadata"))
    queries = _queries(raw["queries"], total, metadata, spending)
    return ReportSpec(
        path=path,
        title=title,
        metadata=metadata,
        contributions=contributions,
        queries=queries,
        seed=seed,
        accounting=accounting,
        allow_seeded_noise=allow_seeded_noise,
        **source,
    )


def _local_source(raw: Mapping[str, Any], data: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """The data file, its privacy unit and the ledger with its budget, of a spec run locally."""
    check_keys(data, "data", ("path", "privacy_unit"), ("path", "privacy_unit"))
    if "budget" not in raw:
        raise SpecError("the spec: missing the required key 'budget' (or give [data] dataset)")
    budget = spec_table(raw["budget"], "budget")
    check_keys(budget, "budget", (*BUDGET_KEYS, "ledger", "same_data"), ("ledger",))
    allowance = spec_budget(budget, also=("ledger", "same_data"))
    same_data = budget.get("same_data", False)
    if not isinstance(same_data, bool):
        raise SpecError(f"budget.same_data must be true or false, got {kind_of(same_data)}")
    return {
        "data": folder / spec_string(data, "path", "data"),
        "privacy_unit": spec_string(data, "privacy_unit", "data"),
        "budget": allowance,
        "ledger": folder / spec_string(budget, "ledger", "budget"),
        "same_data": same_data,
    }


def _remote_source(raw: Mapping[str, Any], data: Mapping[str, Any], seeded: bool) -> dict[str, Any]:
    """The dataset of a spec run on a privframe server, whose budget and noise are the server's."""
    check_keys(data, "data", ("dataset",))
    if "budget" in raw:
        raise SpecError(
            "budget: a spec run on a server ([data] dataset) spends the analyst's budget on "
            "the server, which keeps it; remove [budget]"
        )
    if seeded:
        raise SpecError("report.seed: a server draws its own noise; remove the seed")
    # The grant's kind is known on connecting: a spec that writes epsilon spends an epsilon grant.
    tables = [raw.get("report", {}), *(q for q in raw.get("queries", []) if isinstance(q, dict))]
    spends_epsilon = any(isinstance(t, dict) and "epsilon" in t for t in tables)
    return {"dataset": spec_string(data, "dataset", "data"), "spends_epsilon": spends_epsilon}
