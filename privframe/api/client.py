r"""An analyst's session on a privframe server: the same API, the data never at hand.

:func:`connect` opens a :class:`RemoteSession` on one dataset of a server
started with ``privframe serve`` (``docs/server.md``). It is a
:class:`~privframe.api.query.Door` like a local :class:`~privframe.Session`:
``query()`` gives the same builder, ``sql()`` the same SQL front end, and their
``check``, ``explain`` and ``release`` send the plan as data (the versioned
JSON of :mod:`privframe.api.wire`; SQL as its text) for the server to rebuild
through its own checks and charge to this analyst's budget on this dataset;
``query.tune`` runs there too, on the analyst's Session, and its tuned
query is a query of this session; so do ``marginals`` and ``synthesize``
and their explanations (the calls' arguments as the data of
:mod:`privframe.api.wire.synthesis`).
The budget views (``spent``, ``remaining``, ``ledger``, ``report()``,
``guarantee()``, the notebook view) read this analyst's own ledger. Results
come back as pandas (the default) or polars. A refusal is raised as the same
error a local Session raises; a refusal of the server's own (no valid token,
a dataset not granted, a body too large, the server unreachable) as
:class:`~privframe.errors.ServerError`.

A grant's budget is of one kind, which the session takes from the server
(:attr:`RemoteSession.budget_kind`): a zCDP grant's releases spend ``rho``,
a pure-DP grant's (``pf.PureDP``) ``epsilon``, an (ε, δ) grant's
(``pf.ApproxDP``) ``epsilon`` and ``delta``, as a local Session with that
budget does; ``spent``, ``remaining`` and ``basic_spent`` are budgets of that
kind.

Needs httpx (``pip install 'privframe[client]'``).

Example:
    A server in this process (a test's ``client=``; an analyst gives the
    server's address instead), its data never in the analyst's hands:

    >>> import tempfile
    >>> from pathlib import Path
    >>> import privframe as pf
    >>> from fastapi.testclient import TestClient
    >>> from privframe.api.client import RemoteSession
    >>> from privframe.api.server.app import create_app
    >>> from privframe.api.server.config import load_config
    >>> from privframe.api.server.store import Store
    >>> folder = Path(tempfile.mkdtemp())
    >>> pf.datasets.synthetic_transactions(2_000).write_parquet(folder / "t.parquet")
    >>> _ = (folder / "serve.toml").write_text(
    ...     '[datasets.t]\ndata = "t.parquet"\nprivacy_unit = "user_id"\n')
    >>> config = load_config(folder / "serve.toml")
    >>> with Store(config.database) as store:
    ...     token = store.add_analyst("alice")
    ...     store.grant("alice", "t", pf.zCDP(1.0))
    >>> http = TestClient(create_app(config)).__enter__()
    >>> sess = RemoteSession("http://testserver", "t", token, results="polars", client=http)
    >>> query = sess.query().bound(max_groups=1, max_rows_per_group=1).agg(pf.count())
    >>> query.explain(rho=0.25).plan.cost
    zCDP(rho=0.25, delta=0.0)
    >>> query.release(rho=0.25).columns
    ['count']
    >>> batch = sess.batch([query.request(0.25, label="again")])
    >>> batch.cost, [table.height for table in batch.release()], [e.label for e in batch.entries]
    (zCDP(rho=0.25, delta=0.0), [1], ['again'])
    >>> sess.spent, [e.label for e in sess.ledger]
    (zCDP(rho=0.5, delta=0.0), ['', 'again'])

    Marginals and synthetic tables are made there too, as a local Session makes them:

    >>> regions = {"region": ["north", "south", "east", "west"]}
    >>> tables = sess.marginals(["region"], rho=0.25, domains=regions, max_rows=1)
    >>> tables[("region",)]["region"].to_list(), sess.spent
    (['north', 'south', 'east', 'west'], zCDP(rho=0.75, delta=0.0))

    A pure-DP grant's releases spend ε:

    >>> with Store(config.database) as store:
    ...     token = store.add_analyst("bob")
    ...     store.grant("bob", "t", pf.PureDP(1.0))
    >>> pure = RemoteSession("http://testserver", "t", token, results="polars", client=http)
    >>> query = pure.query().bound(max_groups=1, max_rows_per_group=1).agg(pf.count())
    >>> pure.budget_kind.__name__, query.explain(epsilon=0.5).plan.family
    ('PureDP', 'laplace')
    >>> query.release(epsilon=0.5).columns, pure.remaining
    (['count'], PureDP(epsilon=0.5))
    >>> http.__exit__(None, None, None)
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, urlsplit

import polars as pl

from privframe import errors
from privframe.accounting import replay
from privframe.accounting._kinds import Kind, Spendable, with_article
from privframe.accounting._report import BudgetReport, refusal
from privframe.accounting.accountant import Accountant
from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
from privframe.accounting.ledger import Ledger, LedgerEntry
from privframe.accounting.replay import Guarantee
from privframe.api.html import session_html
from privframe.api.query import Query, Request
from privframe.api.server.config import is_loopback
from privframe.api.sql import TABLE, Column, SQLQuery, parse
from privframe.api.sql_entry import SQLEntry
from privframe.api.synthesis import Explained
from privframe.api.tune import Tuned
from privframe.api.wire import (
    WIRE_VERSION,
    WireError,
    decode_budget,
    decode_kind,
    decode_number,
    decode_plan_query,
    decode_released,
    decode_schema,
    decode_table,
    encode_marginals,
    encode_plan,
    encode_request,
    encode_synthesis,
    encode_tune,
)
from privframe.api.wire.synthesis import CallKind
from privframe.api.wire.values import decode_values
from privframe.engines.inputs import exact_pandas
from privframe.numeric import Number, round_up
from privframe.plan import auto_bounds
from privframe.plan.explanation import Explanation, explain, explained, with_charge
from privframe.plan.ir import Bound, Plan
from privframe.plan.planner import plan_approx_release, plan_pure_release
from privframe.plan.release import added, asked_budget, describe, zero_cost
from privframe.plan.release_options import ReleaseOptions
from privframe.plan.split import Balance
from privframe.plan.tuning_choice import Choice

if TYPE_CHECKING:
    import httpx
    import pandas as pd

__all__ = ["TOKEN_ENV", "RemoteBatch", "RemoteSession", "connect", "tls_context"]

TOKEN_ENV = "PRIVFRAME_TOKEN"
"""The environment variable :func:`connect` reads the token from when none is given."""


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise errors.ServerError(
            "pf.connect needs httpx: pip install 'privframe[client]'"
        ) from None
    return httpx


def tls_context(verify: bool | str) -> bool | ssl.SSLContext:
    """What httpx's ``verify`` takes for ``verify``: a CA bundle's path becomes a TLS context.

    Example:
        >>> from privframe.api.client import tls_context
        >>> tls_context(True)
        True
    """
    return ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify


def _raise(status: int, body: Any) -> None:
    """Raise what a refusal's body names: the library's own error, or a ServerError."""
    error = body.get("error") if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str):
        message = f"the server answered {status} without an explanation"
    cls = getattr(errors, kind, None) if isinstance(kind, str) else None
    if cls is errors.SQLError and isinstance(error, dict):
        construct, position = error.get("construct"), error.get("position")
        raise errors.SQLError(
            message,
            construct=construct if isinstance(construct, str) else "",
            position=tuple(position) if isinstance(position, list) else None,
        )
    if (
        isinstance(cls, type)
        and issubclass(cls, errors.PrivframeError)
        and cls is not errors.ServerError
    ):
        raise cls(message)
    raise errors.ServerError(message, status=status)


def _check_url(url: object, insecure_http: bool) -> str:
    """``url`` if it is an http(s) address; plain HTTP only to this machine unless allowed."""
    parsed = urlsplit(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise errors.InvalidArgumentError(
            f"url must be the server's https:// (or http://127.0.0.1) address, got {url!r}"
        )
    if parsed.scheme == "http" and not is_loopback(parsed.hostname) and not insecure_http:
        raise errors.InvalidArgumentError(
            f"{url} is plain HTTP to another machine: your token and results would cross the "
            "network in clear text. Use https://, or pass insecure_http=True if a TLS tunnel "
            "you trust carries the connection (docs/server.md)"
        )
    return url  # type: ignore[return-value]  # a str, checked above


def _granted(budget: object) -> zCDP:
    """``budget``, which is a zCDP one: a zCDP grant's report, and so its costs, are zCDP."""
    assert isinstance(budget, zCDP)
    return budget


class RemoteSession(SQLEntry):
    """One analyst's session on one dataset of a privframe server; make it with :func:`connect`.

    Args:
        url: the server's address, ``https://...`` (``http://`` on the loopback
            interface only: ``docs/server.md``).
        dataset: the dataset's name on the server.
        token: the analyst's access token.
        results: released tables as ``"pandas"`` or ``"polars"``.
        timeout: seconds to wait for an answer.
        verify: check the server's certificate (True), against a CA bundle
            (its path), or not at all (False: tests only).
        insecure_http: allow ``http://`` to another machine (the token would
            cross the network in clear text unless a tunnel carries it).
        client: an ``httpx.Client`` to send requests with, instead of a new one
            (tests pass an in-process one).

    Raises:
        ServerError: the server cannot be reached, the token is not valid, or
            the dataset is not granted to this analyst.

    Example:
        >>> import privframe as pf
        >>> pf.RemoteSession("http://dp.example.org", "sales", "pf_token")
        Traceback (most recent call last):
        privframe.errors.InvalidArgumentError: http://dp.example.org is plain HTTP to another \
machine: ...

        The module's example runs a whole session against a server.
    """

    def __init__(
        self,
        url: str,
        dataset: str,
        token: str,
        *,
        results: Literal["pandas", "polars"] = "pandas",
        timeout: float = 300.0,
        verify: bool | str = True,
        insecure_http: bool = False,
        client: httpx.Client | None = None,
    ) -> None:
        if results not in ("pandas", "polars"):
            raise errors.InvalidArgumentError(
                f"results must be 'pandas' or 'polars', got {results!r}"
            )
        if not isinstance(token, str) or not token:
            raise errors.InvalidArgumentError(
                f"token must be the access token the data owner gave you (or set {TOKEN_ENV})"
            )
        if client is None:
            url = _check_url(url, insecure_http)
            client = _httpx().Client(base_url=url, timeout=timeout, verify=tls_context(verify))
        self._http = client
        self._headers = {"Authorization": f"Bearer {token}"}
        self._url, self._dataset, self._results = url, dataset, results
        self._base = f"/v1/datasets/{quote(dataset, safe='')}"
        info = self._call("GET", self._base)
        self._unit: str | None = info["privacy_unit"]
        self._schema = decode_schema(info["schema"])
        self._metadata = {
            column: Column(
                bounds=tuple(facts["bounds"]) if "bounds" in facts else None,
                keys=tuple(facts["keys"]) if "keys" in facts else None,
                candidates=facts.get("candidates"),
                type=facts.get("type"),
            )
            for column, facts in info["metadata"].items()
        }
        limits = info["contributions"]
        self._contributions = None if limits is None else Bound(**limits)
        # A server that does not say (an older one) grants zCDP budgets only.
        kind: Kind = zCDP
        if "budget_kind" in info:
            failure = None
            try:
                kind = decode_kind(info["budget_kind"], "budget_kind")
            except WireError as err:
                failure = f"the server named a kind of budget this privframe does not know ({err})"
            if failure is not None:
                raise errors.ServerError(f"{failure}: install a privframe of the server's version")
        self._kind = kind

    # -- transport ----------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None, *, charges: bool = False) -> Any:
        """Send a request; its JSON answer, or the refusal raised. ``charges``: it may spend."""
        httpx = _httpx()
        failure = None
        try:
            answer = self._http.request(method, path, json=body, headers=self._headers)
        except httpx.HTTPError as err:
            failure = f"{type(err).__name__}: {err}"
        if failure is not None:
            charged = (
                "; the release may have been charged all the same: see sess.ledger"
                if charges
                else ""
            )
            raise errors.ServerError(
                f"cannot reach the privframe server at {self._url}: {failure}{charged}"
            )
        try:
            payload = answer.json() if "json" in answer.headers.get("content-type", "") else None
        except ValueError:
            payload = None
        if answer.status_code != 200:
            _raise(answer.status_code, payload)
        return payload if payload is not None else answer.text

    # -- the Door a query goes through --------------------------------------------------

    @property
    def columns(self) -> list[str]:
        """The dataset's column names (its public schema)."""
        return list(self._schema)

    @property
    def privacy_unit(self) -> str | None:
        """The column identifying a person on the server's dataset."""
        return self._unit

    @property
    def private_tables(self) -> dict[str, list[str]]:
        """The dataset as the one private table a query reads: ``{"data": columns}``."""
        return {"data": self.columns}

    @property
    def schema(self) -> pl.Schema:
        """The dataset's column names and types (public)."""
        return pl.Schema(self._schema)

    @property
    def dataset(self) -> str:
        """The dataset's name on the server."""
        return self._dataset

    @property
    def metadata(self) -> dict[str, Column]:
        """The public facts the data owner published per column (types, bounds, keys)."""
        return dict(self._metadata)

    def query(self) -> Query:
        """Start a query, as on a local Session: chain, then explain or release."""
        return Query(self)

    def check(self, plan: Plan, with_error: bool = False) -> pl.Schema:
        """The server's check of ``plan`` against the public schema; the schema it sees."""
        body = {"version": WIRE_VERSION, "plan": encode_plan(plan), "with_error": with_error}
        return decode_schema(self._call("POST", f"{self._base}/check", body)["schema"])

    @property
    def budget_kind(self) -> Kind:
        """The kind of this analyst's grant on the dataset: what its releases spend.

        ``zCDP`` (releases spend ρ), ``PureDP`` (ε) or ``ApproxDP`` (ε and δ),
        as the server says; a server too old to say grants zCDP budgets only.
        """
        return self._kind

    def _asked(self, rho: Number | None, epsilon: Number | None) -> Number:
        """The grant's budget parameter asked; the other one, or none, refused before the server.

        As a local Session with this kind of budget refuses them, naming the grant.
        """
        return asked_budget(
            self._kind,
            rho,
            epsilon,
            whose=f"your grant on {self._dataset!r} is {with_article(self._kind.__name__)} budget",
            not_epsilon=(
                f"your grant on {self._dataset!r} is a zCDP budget: a release spends rho, not "
                "epsilon: pass rho=..., e.g. rho=0.1 (pf.zCDP.from_approx_dp(epsilon, delta).rho "
                "converts an (epsilon, delta) target); the data owner grants epsilon budgets "
                "with privframe admin ... --epsilon"
            ),
        )

    def explain(
        self,
        plan: Plan,
        rho: Number | None = None,
        weights: Mapping[str, float] | Balance | None = None,
        delta: Number | None = None,
        *,
        epsilon: Number | None = None,
    ) -> Explanation:
        """What releasing ``plan`` at ``rho`` (or ``epsilon``) would do; spends nothing.

        The server checks the plan as a local Session would and answers the
        facts of this analyst's budget an explanation needs (the ρ or ε a
        release would spend, the δ a private selection would, the reporting
        δ); the explanation is then derived from those public facts as a
        local Session derives it, by the same planner. A zCDP grant's
        releases spend ``rho``; a pure-DP or (ε, δ) grant's ``epsilon`` (and
        ``delta`` under (ε, δ)-DP).
        """
        self._asked(rho, epsilon)
        options = ReleaseOptions(weights=weights, delta=delta)
        request = Request(Query(self, plan), rho, options, epsilon=epsilon)
        body = {"version": WIRE_VERSION, "request": encode_request(request)}
        facts = self._call("POST", f"{self._base}/explain", body)
        affordable = decode_number(facts["affordable"])
        if auto_bounds.asks(plan) and self._kind is not zCDP:
            raise auto_bounds.not_zcdp(self.remaining)
        if self._kind is PureDP:
            return explained(plan, plan_pure_release(plan, facts["has_unit"], affordable, weights))
        if self._kind is ApproxDP:
            release = plan_approx_release(plan, facts["has_unit"], affordable, delta or 0, weights)
            after = self._replayed().spent_after(release.cost, description=describe(plan, release))
            return with_charge(explained(plan, release), *after)
        chosen = facts["delta"]

        def at(rho: Fraction) -> Explanation:
            return explain(
                plan,
                facts["has_unit"],
                rho,
                weights,
                None if chosen is None else decode_number(chosen),
                float(decode_number(facts["reporting_delta"])),
            )

        if auto_bounds.asks(plan):
            return auto_bounds.explained(plan, affordable, at)
        return at(affordable)

    def release_all(self, requests: Sequence[Request]) -> list[pl.DataFrame | pd.DataFrame]:
        """Release requests all or nothing, charged to this analyst's budget in one step."""
        return self.batch(requests).release()

    def batch(self, requests: Sequence[Request]) -> RemoteBatch:
        """The requests as one all-or-nothing release, sent by :meth:`RemoteBatch.release`."""
        return RemoteBatch(self, list(requests))

    def send(self, requests: Sequence[Request]) -> tuple[list[Any], list[LedgerEntry]]:
        """Send ``requests`` to be released all or nothing: their tables and ledger entries."""
        for request in requests:
            self._asked(request.rho, request.epsilon)
        body = {"version": WIRE_VERSION, "requests": [encode_request(r) for r in requests]}
        answer = self._call("POST", f"{self._base}/release", body, charges=True)
        tables = [self._present(decode_released(text)) for text in answer["tables"]]
        return tables, [LedgerEntry.from_dict(entry) for entry in answer["entries"]]

    def __privframe_tune__(
        self,
        plan: Plan,
        rho: Number,
        plan_rho: Number,
        weights: Mapping[str, float] | Balance | None,
        label: str,
    ) -> Tuned[Query]:
        """``query.tune`` run by the server on this analyst's Session there; not API.

        The server checks and charges ``rho`` as a local Session would
        (:func:`privframe.api.tune.tune`) and answers the tuned plan, rebuilt
        here as a query of this session, and the table of estimates.
        """
        if self._kind is not zCDP:
            raise errors.InvalidValueError(
                f"tune measures with Gaussian noise and spends rho, and your grant on "
                f"{self._dataset!r} is {with_article(self._kind.__name__)} budget: choose the "
                "limits and bounds by hand (from public knowledge of the data, never from "
                "looking at it)"
            )
        body = {"version": WIRE_VERSION, "tune": encode_tune(plan, rho, plan_rho, weights, label)}
        answer = self._call("POST", f"{self._base}/tune", body)
        query = decode_plan_query(answer["plan"], self.query())
        table = decode_table(answer["table"], "table")
        error, given_error = decode_values(answer["errors"], pl.Float64(), "errors").to_list()
        choice = Choice(query.plan, error, given_error, tuple(table.iter_rows()))
        return Tuned(query, self._present(table), choice)

    # -- marginals and synthetic data ---------------------------------------------------

    def marginals(
        self,
        columns: Sequence[str | Sequence[str]],
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        domains: Mapping[str, Any] | None = None,
        max_rows: int | None = None,
        label: str = "marginals",
    ) -> dict[tuple[str, ...], pd.DataFrame | pl.DataFrame]:
        """Noisy marginals over column sets, made by the server as ``Session.marginals`` makes them.

        The server's Session on this dataset checks the call as a local one
        does (domains: those given, a list or :func:`privframe.bin` per
        column, else the keys the data owner published), refuses it with
        nothing charged when it does not fit this analyst's grant, and
        charges ``rho`` (``epsilon`` for a pure-DP grant) in one ledger entry.
        """
        self._asked(rho, epsilon)
        data = encode_marginals(
            columns, rho, epsilon=epsilon, domains=domains, max_rows=max_rows, label=label
        )
        answer = self._synthetic("marginals", data, explain=False)
        return {
            tuple(released["columns"]): self._present(decode_released(released["table"]))
            for released in answer["tables"]
        }

    def explain_marginals(
        self,
        columns: Sequence[str | Sequence[str]],
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        domains: Mapping[str, Any] | None = None,
        max_rows: int | None = None,
    ) -> Explained:
        """What :meth:`marginals` would measure and cost, as the server's Session explains it."""
        self._asked(rho, epsilon)
        data = encode_marginals(columns, rho, epsilon=epsilon, domains=domains, max_rows=max_rows)
        return self._explained("marginals", data)

    def synthesize(
        self,
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        method: Literal["aim", "mst"] = "aim",
        columns: Sequence[str] | None = None,
        workload: Sequence[Sequence[str]] | None = None,
        rows: int | None = None,
        domains: Mapping[str, Any] | None = None,
        max_rows: int | None = None,
        label: str = "synthesize",
    ) -> pd.DataFrame | pl.DataFrame:
        """A synthetic table made by the server as ``Session.synthesize`` makes it.

        Checked, refused with nothing charged, and charged ``rho`` (a pure-DP
        grant: ``epsilon``) in one
        ledger entry by the server's Session on this dataset, as
        :meth:`marginals` is.
        """
        self._asked(rho, epsilon)
        data = encode_synthesis(
            rho,
            epsilon=epsilon,
            method=method,
            columns=columns,
            workload=workload,
            rows=rows,
            domains=domains,
            max_rows=max_rows,
            label=label,
        )
        answer = self._synthetic("synthesize", data, explain=False)
        return self._present(decode_released(answer["table"]))

    def explain_synthesis(
        self,
        rho: Number | None = None,
        *,
        epsilon: Number | None = None,
        method: Literal["aim", "mst"] = "aim",
        columns: Sequence[str] | None = None,
        workload: Sequence[Sequence[str]] | None = None,
        domains: Mapping[str, Any] | None = None,
        max_rows: int | None = None,
    ) -> Explained:
        """What :meth:`synthesize` would measure and cost, as the server's Session explains it."""
        self._asked(rho, epsilon)
        data = encode_synthesis(
            rho,
            epsilon=epsilon,
            method=method,
            columns=columns,
            workload=workload,
            domains=domains,
            max_rows=max_rows,
        )
        return self._explained("synthesize", data)

    def _synthetic(self, kind: CallKind, data: dict[str, Any], *, explain: bool) -> Any:
        body = {"version": WIRE_VERSION, kind: data, "explain": explain}
        return self._call("POST", f"{self._base}/{kind}", body, charges=not explain)

    def _explained(self, kind: CallKind, data: dict[str, Any]) -> Explained:
        answer = self._synthetic(kind, data, explain=True)
        return Explained(decode_budget(answer["cost"], "cost"), tuple(answer["lines"]))

    def _present(self, table: pl.DataFrame) -> Any:
        """A public table as this session's kind of frame (pandas or polars)."""
        return exact_pandas(table) if self._results == "pandas" else table

    # -- SQL ----------------------------------------------------------------------------

    def parse_sql(
        self,
        text: str,
        metadata: Mapping[str, Column] | None = None,
        contributions: Bound | None = None,
    ) -> SQLQuery:
        """``text`` parsed over ``data`` with the metadata the data owner published.

        The server parses the text again with its own copy when it releases,
        so facts of the analyst's own (``metadata=``, ``contributions=``) are
        refused rather than silently not used: give other bounds with the builder.
        """
        if metadata or contributions is not None:
            raise errors.InvalidArgumentError(
                "on a privframe server, SQL takes its bounds, keys and limits from the metadata "
                "the data owner published (sess.metadata); metadata= and contributions= are "
                "not sent: give other bounds and limits with the builder (sess.query())"
            )
        return parse(
            text,
            self.query(),
            unit=self._unit,
            metadata=self._metadata,
            contributions=self._contributions,
            tables={},
            table=TABLE,
        )

    # -- the budget ---------------------------------------------------------------------

    def _budget(self, entries: bool = True) -> tuple[BudgetReport, tuple[LedgerEntry, ...]]:
        answer = self._call("GET", f"{self._base}/budget?entries={str(entries).lower()}")
        fields: dict[str, Any] = {
            name: decode_budget(value, f"report.{name}") if isinstance(value, dict) else value
            for name, value in answer["report"].items()
        }
        ledger = tuple(LedgerEntry.from_dict(entry) for entry in answer["ledger"])
        return BudgetReport(**fields), ledger

    def _replayed(self) -> Accountant:
        """A local accountant over this analyst's ledger as recorded: it checks as a Session."""
        report, entries = self._budget()
        ledger = Ledger(kind=self._kind)
        for entry in entries:
            ledger.append(entry.exact_rho, entry.exact_delta, label=entry.label,
                          description=entry.description, seeded=entry.seeded)  # fmt: skip
        return Accountant(report.budget, ledger=ledger)

    def check_cost(self, cost: Spendable) -> None:
        """Refuse a ``cost`` over what this analyst has left now; spends nothing.

        ``cost`` is a budget of the grant's kind. The check is the one a local
        Session makes (for an (ε, δ) grant, the cost composed with this
        analyst's releases as its ledger charges them). The server checks
        again when it charges, together with the dataset's cap across
        analysts, which this check cannot see.

        Raises:
            BudgetExceededError: ``cost`` does not fit.
            InvalidBudgetError: ``cost`` is not a budget of the grant's kind.
        """
        if self._kind is not zCDP:
            self._replayed().check(cost)
            return
        if not isinstance(cost, zCDP):
            raise errors.InvalidBudgetError(
                f"this grant is a zCDP budget, so a cost is a zCDP one, got {type(cost).__name__}"
            )
        report = self.report()
        spent, left = _granted(report.spent), _granted(report.remaining)
        if cost.exact_rho > left.exact_rho or cost.exact_delta > left.exact_delta:
            spent_exact = (spent.exact_rho, spent.exact_delta)
            # The words a local Accountant.check refuses with.
            why = refusal(cost, "spend", "it requests", spent_exact, report.budget, left)
            raise errors.BudgetExceededError(why)

    def report(self) -> BudgetReport:
        """This analyst's budget on the dataset, spent and remaining (in ρ, (ε, δ) and μ, or ε)."""
        return self._budget(entries=False)[0]

    @property
    def spent(self) -> Spendable:
        """What this analyst has been charged on the dataset, a budget of the grant's kind.

        For an (ε, δ) grant, the tight composition of its releases (:attr:`basic_spent`
        is their sum).
        """
        return self.report().spent

    @property
    def remaining(self) -> Spendable:
        """What this analyst has left on the dataset, a budget of the grant's kind."""
        return self.report().remaining

    @property
    def basic_spent(self) -> Spendable:
        """What basic composition would have charged: the releases' costs added up.

        An (ε, δ) grant is charged less (:attr:`spent`); for the other kinds
        it equals :attr:`spent`.
        """
        report = self.report()
        return report.spent if report.basic is None else report.basic

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        """This analyst's releases on the dataset, in order (no other analyst's)."""
        return self._budget()[1]

    def guarantee(self, delta: float | None = None, method: str = "zcdp") -> float:
        """The ε of this analyst's releases so far, as ``Session.guarantee``."""
        return self.guarantee_statement(delta, method).epsilon

    def guarantee_statement(self, delta: float | None = None, method: str = "zcdp") -> Guarantee:
        """Like :meth:`guarantee`, with δ, the method and how the ε was derived."""
        report, entries = self._budget()
        if delta is None:
            # The reporting δ plus the δ spent (zCDP); the δ charged, rounded up so that it
            # is not below it (ApproxDP); none for pure DP.
            spent = report.spent
            if isinstance(spent, zCDP):
                delta = float(Fraction(report.delta) + spent.exact_delta)
            else:
                delta = round_up(spent.exact_delta) if isinstance(spent, ApproxDP) else 0.0
        return replay.guarantee(entries, delta, method, total=report.spent)

    # -- views and lifecycle ------------------------------------------------------------

    def __repr__(self) -> str:
        return f"RemoteSession(url={self._url!r}, dataset={self._dataset!r})"

    def _repr_html_(self) -> str:
        """Notebook view: this analyst's budget gauge, guarantee and ledger."""
        return session_html(self)

    def close(self) -> None:
        """Close the connection to the server."""
        self._http.close()

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteBatch:
    """Requests to release all or nothing on a server: :meth:`release` sends them.

    The remote counterpart of :class:`~privframe.plan.release.Batch`: the server checks,
    computes, charges the total in one ledger step and draws the noise, in
    that order, in one request.
    """

    def __init__(self, session: RemoteSession, requests: list[Request]) -> None:
        self._session, self._requests = session, requests
        self._entries: list[LedgerEntry] = []

    @property
    def cost(self) -> Spendable:
        """What the batch will charge, from each request's explanation (nothing spent).

        Their costs added up, a budget of the grant's kind (for an (ε, δ)
        grant, what basic composition charges: the ledger charges at most that).
        """
        session = self._session
        total = zero_cost(session.budget_kind)
        for r in self._requests:
            options = r.options
            explanation = session.explain(
                r.query.plan, r.rho, options.weights, options.delta, epsilon=r.epsilon
            )
            total = added(total, explanation.plan.cost)
        return total

    @property
    def entries(self) -> list[LedgerEntry]:
        """The ledger entries the release recorded (empty before it)."""
        return list(self._entries)

    def release(self) -> list[Any]:
        """Send the requests; their released tables, in order."""
        tables, self._entries = self._session.send(self._requests)
        return tables


def connect(
    url: str,
    dataset: str,
    token: str | None = None,
    *,
    results: Literal["pandas", "polars"] = "pandas",
    timeout: float = 300.0,
    verify: bool | str = True,
    insecure_http: bool = False,
) -> RemoteSession:
    """Open a session on a dataset of a privframe server (see the module doc).

    Args:
        url: the server's address.
        dataset: the dataset's name on the server.
        token: the access token the data owner gave you; by default the
            ``PRIVFRAME_TOKEN`` environment variable (keep tokens out of
            notebooks).
        results: released tables as ``"pandas"`` or ``"polars"``.
        timeout: seconds to wait for an answer.
        verify: check the server's TLS certificate (True), against a CA
            bundle (its path), or not (False: tests only).
        insecure_http: allow ``http://`` to another machine (see
            :class:`RemoteSession`); plain HTTP is for 127.0.0.1 otherwise.

    Example:
        >>> import privframe as pf
        >>> pf.connect("https://dp.example.org", "transactions", token="")
        Traceback (most recent call last):
        privframe.errors.InvalidArgumentError: token must be the access token the data owner \
gave you (or set PRIVFRAME_TOKEN)

        The module's example runs a whole session against a server.
    """
    if token is None:
        token = os.environ.get(TOKEN_ENV, "")
    return RemoteSession(
        url,
        dataset,
        token,
        results=results,
        timeout=timeout,
        verify=verify,
        insecure_http=insecure_http,
    )
