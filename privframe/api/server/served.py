r"""What the server does for one analyst's request, without HTTP: the work behind each route.

:class:`Served` holds the configuration, the database and each grant's open
:class:`~privframe.Session`; its methods take the authenticated analyst and
the decoded body and return JSON-ready answers. Refusals are privframe
errors (or :class:`RefusalError` for the server's own: a token, a dataset
not granted); :mod:`privframe.api.server.app` maps both to HTTP.

Example:
    >>> import os, tempfile
    >>> import privframe as pf
    >>> from pathlib import Path
    >>> from privframe.api.server.config import load_config
    >>> from privframe.api.server.served import Served
    >>> from privframe.api.server.store import Store
    >>> folder = Path(tempfile.mkdtemp())
    >>> pf.datasets.synthetic_transactions(1_000).write_parquet(folder / "t.parquet")
    >>> _ = (folder / "serve.toml").write_text(
    ...     '[datasets.t]\ndata = "t.parquet"\nprivacy_unit = "user_id"\n')
    >>> config = load_config(folder / "serve.toml")
    >>> served = Served(config, Store(config.database))
    >>> token = served.store.add_analyst("alice")
    >>> served.store.grant("alice", "t", pf.zCDP(1.0))
    >>> served.analyst(f"Bearer {token}")
    'alice'
    >>> served.describe("alice", "t")["privacy_unit"]
    'user_id'
    >>> served.close()
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import polars as pl

from privframe import errors
from privframe.accounting._kinds import Spendable
from privframe.accounting.accountant import Accountant
from privframe.accounting.budgets import zCDP
from privframe.api.html import session_html
from privframe.api.planning import plan_budget
from privframe.api.query import Request
from privframe.api.server.config import DatasetConfig, ServerConfig
from privframe.api.server.dashboard import dataset_html
from privframe.api.server.store import Store
from privframe.api.session import Session
from privframe.api.spec_values import SpecError
from privframe.api.sql import Column
from privframe.api.sql.metadata import declared_types
from privframe.api.wire import (
    WIRE_VERSION,
    decode_call,
    decode_plan_query,
    decode_request,
    decode_tune,
    encode_budget,
    encode_kind,
    encode_number,
    encode_plan,
    encode_released,
    encode_schema,
    encode_table,
)
from privframe.api.wire.synthesis import CallKind
from privframe.api.wire.values import encode_values
from privframe.engines.registry import open_input
from privframe.mechanisms.noise import Randomness
from privframe.numeric import exact
from privframe.plan.ir import Bound, Plan
from privframe.plan.planner import selects

__all__ = ["RefusalError", "Served", "encode_report"]


class RefusalError(Exception):
    """An answer other than 200: its HTTP status and the error the client raises again.

    Example:
        >>> from privframe.api.server.served import RefusalError
        >>> RefusalError(404, "ServerError", "no dataset 'x' is granted to you").status
        404
    """

    def __init__(self, status: int, kind: str, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.fields = status, kind, message, fields


def encode_report(session: Session, entries: bool = True) -> dict[str, Any]:
    """A session's budget report (and ledger) as JSON: exact budgets as rational text.

    Each budget of the report is :func:`~privframe.api.wire.encode_budget`'s
    object, whose keys say its kind (a zCDP report's are what they always were).

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.api.server.served import encode_report
        >>> sess = pf.Session(pl.DataFrame({"u": [1]}), "u", pf.zCDP(1.0))
        >>> encode_report(sess)["report"]["budget"]
        {'rho': '1', 'delta': '0'}
        >>> pure = pf.Session(pl.DataFrame({"u": [1]}), "u", pf.PureDP(2.0))
        >>> encode_report(pure)["report"]["remaining"]
        {'epsilon': '2'}
    """
    report = session.report()
    fields: dict[str, Any] = {}
    for name in type(report).__dataclass_fields__:
        value = getattr(report, name)
        fields[name] = value if isinstance(value, int | float | None) else encode_budget(value)
    ledger = [entry.to_dict() for entry in session.ledger] if entries else []
    return {"report": fields, "ledger": ledger}


def _columns(dataset: DatasetConfig) -> dict[str, Column]:
    """The dataset's metadata as the Session takes it."""
    return {column: Column(**facts) for column, facts in dataset.metadata.items()}


@dataclass
class _Cached:
    budget: Spendable
    session: Session


class Served:
    """The server's state: its configuration, database and each grant's open Session.

    At start it records each dataset's cap, verifies the database
    (:meth:`Store.verify <privframe.api.server.store.Store.verify>`) and opens
    each dataset once, so that a missing file or privacy unit column stops
    the server rather than answering analysts. A grant's Session is opened at
    its first request and kept; when an admin changes the grant's budget it
    is opened again with the new one (the database checks every charge
    against the current budget in any case).

    Args:
        config: the server's configuration.
        store: its database.
        rng: the noise source; None for the OS CSPRNG. Tests alone pass a
            seeded one (the results are then not private).

    Raises:
        SpecError: a dataset cannot be opened (the message names it).
        LedgerError: the database cannot be used, or was changed outside privframe.
    """

    def __init__(self, config: ServerConfig, store: Store, rng: Randomness | None = None) -> None:
        self.config, self.store, self._rng = config, store, rng
        self._sessions: dict[tuple[str, str], _Cached] = {}
        self._lock = threading.Lock()
        for name, dataset in config.datasets.items():
            try:
                store.set_cap(name, dataset.cap)
            except errors.InvalidValueError as err:
                raise SpecError(f"datasets.{name}.cap: {err}") from None
            try:
                types = declared_types(_columns(dataset))
                open_input(dataset.data, dataset.privacy_unit, types=types)
            except errors.PrivframeError as err:
                raise SpecError(f"datasets.{name}: {err}") from None
        store.verify()

    # -- who and what ------------------------------------------------------------------

    def analyst(self, authorization: str | None) -> str:
        """The analyst a request's ``Authorization`` header names, or a 401 refusal."""
        scheme, _, token = (authorization or "").partition(" ")
        analyst = self.store.authenticate(token.strip()) if scheme.lower() == "bearer" else None
        if analyst is None:
            raise RefusalError(401, "ServerError", "a valid bearer token is required")
        return analyst

    def dataset(self, analyst: str, name: str) -> tuple[DatasetConfig, Spendable]:
        """The dataset and the analyst's budget on it; 404 unless it is served and granted.

        The database is asked either way, so that the time of the answer does
        not tell a dataset that is served from one that is not.
        """
        budget = self.store.budget(analyst, name)
        dataset = self.config.datasets.get(name)
        if dataset is None or budget is None:
            raise RefusalError(
                404,
                "ServerError",
                "no such dataset is granted to you; GET /v1/datasets lists the ones that are",
            )
        return dataset, budget

    def session(self, analyst: str, name: str) -> Session:
        """The analyst's Session on the dataset, opened again if its budget changed."""
        dataset, budget = self.dataset(analyst, name)
        with self._lock:
            cached = self._sessions.get((analyst, name))
            if cached is None or cached.budget != budget:
                # The old Session is not closed: a release may still be charging through it
                # (its database ledger holds no connection of its own, so nothing leaks).
                cached = _Cached(budget, self._open(analyst, dataset, budget))
                self._sessions[(analyst, name)] = cached
            return cached.session

    def _open(self, analyst: str, dataset: DatasetConfig, budget: Spendable) -> Session:
        accountant = Accountant(budget, ledger=self.store.ledger(analyst, dataset.name))
        limits = dataset.contributions
        return Session(
            dataset.data,
            dataset.privacy_unit,
            accountant,
            rng=self._rng,
            metadata=_columns(dataset),
            contributions=None if limits is None else Bound(**limits),
        )

    # -- the routes' work -----------------------------------------------------------------

    def granted(self, analyst: str) -> dict[str, Any]:
        """The datasets served and granted to ``analyst``."""
        names = self.store.granted(analyst)
        return {"datasets": [name for name in names if name in self.config.datasets]}

    def describe(self, analyst: str, name: str) -> dict[str, Any]:
        """A dataset's public facts (privacy unit, schema, metadata, limits) and the grant's kind.

        ``budget_kind`` says what the analyst's releases spend: ``"zcdp"``
        (ρ), ``"pure_dp"`` (ε) or ``"approx_dp"`` (ε and δ). A client that
        does not read it (an older one) spends ρ.
        """
        session = self.session(analyst, name)
        dataset = self.config.datasets[name]
        return {
            "name": name,
            "privacy_unit": session.privacy_unit,
            "schema": encode_schema(session.check(Plan())),
            "metadata": {column: dict(facts) for column, facts in dataset.metadata.items()},
            "contributions": dataset.contributions,
            "version": WIRE_VERSION,
            "budget_kind": encode_kind(session.budget_kind),
        }

    def budget(self, analyst: str, name: str, entries: bool = True) -> dict[str, Any]:
        """The analyst's budget report on a dataset, with its ledger unless ``entries`` is False."""
        return encode_report(self.session(analyst, name), entries)

    def view(self, analyst: str, name: str) -> str:
        """The notebook view of the analyst's budget on a dataset (HTML)."""
        return session_html(self.session(analyst, name))

    def dashboard(self, analyst: str, name: str) -> str:
        """The dataset's section of the analyst's dashboard (HTML): its budget and the planner."""
        return dataset_html(name, self.session(analyst, name))

    def plan(
        self, analyst: str, name: str, sql: str, rho: float | None, epsilon: float | None
    ) -> dict[str, str]:
        """The budget planner's answer for an SQL query at a budget (HTML); spends nothing.

        The text is parsed over the analyst's Session (its refusals are the
        local ones, with the SQL construct and position) and planned by
        :func:`~privframe.plan_budget` at ``rho`` (a zCDP grant) or
        ``epsilon``: each output's 95% interval from the query's explanation,
        which reads public metadata only. Nothing is charged.
        """
        session = self.session(analyst, name)
        query = session.parse_sql(sql)
        return {"html": plan_budget({"next query": query}, rho=rho, epsilon=epsilon).html()}

    def check(self, analyst: str, name: str, plan: dict[str, Any], with_error: bool) -> Any:
        """A plan checked against the dataset's public schema; the schema it sees."""
        session = self.session(analyst, name)
        decoded = decode_plan_query(plan, session.query()).plan
        return {"schema": encode_schema(session.check(decoded, with_error))}

    def explain(self, analyst: str, name: str, request: dict[str, Any]) -> dict[str, Any]:
        """The budget facts an explanation needs, for a request checked like a release.

        The plan is explained here as a local Session would (so a refusal is
        the local one); the client derives the same explanation from these
        public facts: the budget a release would spend (``affordable``: ρ, or
        ε for a pure-DP or (ε, δ) grant), the δ a private selection spends
        and the reporting δ (zCDP), whether the data has a privacy unit, the
        cost, and the grant's ``kind``.
        """
        session = self.session(analyst, name)
        asked = decode_request(request, session)
        plan, options = asked.query.plan, asked.options
        explanation = session.explain(
            plan, asked.rho, options.weights, options.delta, epsilon=asked.epsilon
        )
        cost = explanation.plan.cost
        facts: dict[str, Any] = {
            "kind": encode_kind(session.budget_kind),
            "has_unit": session.privacy_unit is not None,
            "cost": encode_budget(cost),
            "reporting_delta": encode_number(session.accountant.delta),
        }
        if not isinstance(cost, zCDP):
            assert asked.epsilon is not None  # the session refused rho above
            affordable = session.accountant.affordable(asked.epsilon)
            return {**facts, "affordable": encode_number(affordable), "delta": None}
        assert asked.rho is not None  # the session refused epsilon above
        # The δ a private selection spends is its cost's δ; a plan that selects nothing spends none.
        delta = cost.exact_delta if selects(plan) else None
        return {
            **facts,
            "affordable": encode_number(session.accountant.affordable(asked.rho)),
            "delta": None if delta is None else encode_number(delta),
        }

    def release(
        self, analyst: str, name: str, requests: list[dict[str, Any]], noted: dict[str, str]
    ) -> dict[str, Any]:
        """Requests released all or nothing; ``noted["asked"]`` gets their budget for the audit log.

        What they ask, added up: ``rho=...`` (zCDP), ``epsilon=...`` (and
        ``delta=...`` when an (ε, δ) grant's requests spend δ). The answer is
        built only once :meth:`Batch.release <privframe.plan.release.Batch.release>`
        has returned, that is once the charge is committed to the database.
        """
        session = self.session(analyst, name)
        decoded = [decode_request(r, session) for r in requests]
        noted["asked"] = _asked(decoded)
        batch = session.batch(decoded)
        tables = batch.release()
        return {
            # A Session over a file releases polars tables.
            "tables": [encode_released(table) for table in tables],
            "entries": [entry.to_dict() for entry in batch.entries],
        }

    def tune(
        self, analyst: str, name: str, asked: dict[str, Any], noted: dict[str, str]
    ) -> dict[str, Any]:
        """``query.tune`` run on the analyst's Session; ``noted["asked"]`` gets its ρ.

        The wire object (:func:`~privframe.api.wire.decode_tune`) is rebuilt on
        the analyst's Session and tuned there as a local query is
        (:func:`privframe.api.tune.tune`): the same checks, refused before
        anything is read or charged, and ``rho`` charged to the analyst's
        ledger in one entry. The answer, built after that charge, is public:
        the tuned plan, the table of estimates, the estimated errors
        (``[tuned, given]``, as floats that may be ``"inf"``).
        """
        session = self.session(analyst, name)
        request = decode_tune(asked, session)
        noted["asked"] = f"rho={encode_number(request.rho)}"
        tuned = request.query.tune(
            request.rho, plan_rho=request.plan_rho, weights=request.weights, label=request.label
        )
        choice = tuned.choice
        return {
            "plan": encode_plan(tuned.query.plan),
            # A Session over a file presents polars tables.
            "table": encode_table(tuned.table),
            "errors": encode_values(pl.Series([choice.error, choice.given_error])),
        }

    def synthetic(
        self,
        analyst: str,
        name: str,
        kind: CallKind,
        data: dict[str, Any],
        explain: bool,
        noted: dict[str, str],
    ) -> dict[str, Any]:
        """``Session.marginals`` or ``synthesize`` run on the analyst's Session, or explained.

        The wire object (:func:`~privframe.api.wire.decode_call`) holds the
        method's arguments; the analyst's Session makes the call as a local
        one does, with the domains sent and the dataset's published keys: the
        same checks, refused before anything is read or charged, and the cost
        charged to the analyst's ledger in one entry. ``noted["asked"]`` gets
        the budget asked (or ``explain``). The answer to explain is the
        explanation (``cost``, ``lines``), spending nothing; the answer to a
        call, built after its charge, is the released tables (``marginals``:
        ``tables``, each with its ``columns``; ``synthesize``: ``table``) and
        the ``cost`` charged, that of the call's explanation.
        """
        session = self.session(analyst, name)
        call = decode_call(kind, data, explain)
        noted["asked"] = "explain" if explain else call.asked
        if kind == "marginals":
            explained = session.explain_marginals(**call.arguments)
        else:
            explained = session.explain_synthesis(**call.arguments)
        cost = encode_budget(explained.cost)
        if explain:
            return {"cost": cost, "lines": list(explained.lines)}
        if kind == "synthesize":
            # A Session over a file releases polars tables.
            table = session.synthesize(**call.arguments, **call.spending)
            return {"table": encode_released(table), "cost": cost}
        tables = session.marginals(**call.arguments, **call.spending)
        return {
            "tables": [
                {"columns": list(columns), "table": encode_released(table)}
                for columns, table in tables.items()
            ],
            "cost": cost,
        }

    def close(self) -> None:
        """Close the grants' ledgers and the database."""
        with self._lock:
            for cached in self._sessions.values():
                cached.session.accountant.close()
            self._sessions.clear()
        self.store.close()


def _asked(requests: list[Request]) -> str:
    """What ``requests`` ask, added up, for the audit log (public: the analyst chose it)."""
    if all(r.rho is not None for r in requests):
        return f"rho={encode_number(sum((exact('rho', r.rho) for r in requests), Fraction(0)))}"
    epsilon = sum((exact("epsilon", r.epsilon or 0) for r in requests), Fraction(0))
    delta = sum(
        (exact("delta", r.options.delta or 0) for r in requests if r.epsilon is not None),
        Fraction(0),
    )
    spent = f", delta={encode_number(delta)}" if delta else ""
    return f"epsilon={encode_number(epsilon)}{spent}"
