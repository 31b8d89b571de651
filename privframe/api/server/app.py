"""The server's HTTP API: each analyst's plans, rebuilt and released on the data it never sees.

Every route under ``/v1`` needs ``Authorization: Bearer <token>``
(:meth:`~privframe.api.server.store.Store.authenticate`); a dataset not granted
to the analyst answers 404, as one that does not exist. A request body is
read up to ``max_body_bytes`` (413 past it), parsed as JSON, checked against
its pydantic envelope, and its plan rebuilt by the wire codec
(:mod:`privframe.api.wire`) through the same builder and allow-list as a
local query. Then the analyst's :class:`~privframe.Session` on that dataset
runs it: its accountant charges the analyst's ledger in the server's
database (the grant's budget and the dataset's cap checked in the same
transaction), and the response is built only after that charge committed.

RefusalErrors are 4xx with ``{"error": {"type", "message"}}``: the type is a
:mod:`privframe.errors` class the client raises again, and the message is the
library's own, which never holds a data value. Every request, answered or
refused, is one record of the audit log, holding its route, status, the ρ a
release asked, and the error type only.

==============================  ==========================================
``GET  /v1/datasets``           the datasets granted to the analyst
``GET  /v1/datasets/{name}``    its public schema, metadata and limits
``GET  /v1/datasets/{name}/budget``  budget report and ledger (own only)
``GET  /v1/datasets/{name}/view``    the notebook view of the budget (HTML)
``POST /v1/datasets/{name}/check``   a plan against the public schema
``POST /v1/datasets/{name}/explain`` the public facts an explanation needs
``POST /v1/datasets/{name}/release`` requests, released all or nothing
``GET  /dashboard``             the budget dashboard page
==============================  ==========================================

Example:
    >>> import privframe.api.server.app as app  # doctest: +SKIP
    >>> app.create_app(load_config("serve.toml"))  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

import polars as pl
import pydantic
from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from privframe import errors
from privframe.accounting._numbers import exact
from privframe.accounting.accountant import Accountant
from privframe.accounting.budgets import zCDP
from privframe.api.html import session_html
from privframe.api.server.config import DatasetConfig, ServerConfig
from privframe.api.server.dashboard import DASHBOARD_HTML, DASHBOARD_JS
from privframe.api.server.store import Store
from privframe.api.session import Session
from privframe.api.sql import Column
from privframe.api.wire import (
    WIRE_VERSION,
    decode_plan_query,
    decode_request,
    encode_number,
    encode_schema,
)
from privframe.mechanisms.noise import Randomness
from privframe.plan.ir import Bound, Plan

__all__ = ["RefusalError", "Served", "create_app", "encode_report", "encode_table", "serve"]

_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_MAX_REQUESTS = 64
"""The most requests one release body may hold (a report's queries)."""


class RefusalError(Exception):
    """An answer other than 200: its HTTP status and the error the client raises again."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def _status(err: errors.PrivframeError) -> int:
    if isinstance(err, errors.BudgetExceededError):
        return 409
    if isinstance(err, errors.LedgerError):
        return 503
    return 400


class _Envelope(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)

    version: int


_Body = TypeVar("_Body", bound=_Envelope)


class _PlanBody(_Envelope):
    plan: dict[str, Any]
    with_error: bool = False


class _ExplainBody(_Envelope):
    request: dict[str, Any]


class _ReleaseBody(_Envelope):
    requests: list[dict[str, Any]] = pydantic.Field(min_length=1, max_length=_MAX_REQUESTS)


def encode_table(frame: pl.DataFrame) -> str:
    """A released (public) table as base64 Arrow IPC: exact types, read back by the client.

    Example:
        >>> import polars as pl
        >>> from privframe.api.server.app import encode_table
        >>> text = encode_table(pl.DataFrame({"n": [3]}))
        >>> import base64, io
        >>> pl.read_ipc_stream(io.BytesIO(base64.b64decode(text))).item()
        3
    """
    sink = io.BytesIO()
    frame.write_ipc_stream(sink)
    return base64.b64encode(sink.getvalue()).decode("ascii")


def _zcdp(budget: zCDP) -> dict[str, str]:
    return {"rho": encode_number(budget.exact_rho), "delta": encode_number(budget.exact_delta)}


def encode_report(session: Session) -> dict[str, Any]:
    """A session's budget report and ledger as JSON: exact budgets as rational text.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.api.server.app import encode_report
        >>> sess = pf.Session(pl.DataFrame({"u": [1]}), "u", pf.zCDP(1.0))
        >>> encode_report(sess)["report"]["budget"]
        {'rho': '1', 'delta': '0'}
    """
    report = session.report()
    fields: dict[str, Any] = {}
    for name in type(report).__dataclass_fields__:
        value = getattr(report, name)
        fields[name] = _zcdp(value) if isinstance(value, zCDP) else value
    return {"report": fields, "ledger": [entry.to_dict() for entry in session.ledger]}


def _metadata(dataset: DatasetConfig) -> dict[str, Any]:
    return {column: dict(facts) for column, facts in dataset.metadata.items()}


@dataclass
class _Cached:
    budget: zCDP
    session: Session


class Served:
    """The server's state: its configuration, database and each grant's open Session.

    A grant's Session is opened at its first request and kept; when an admin
    changes the grant's budget it is opened again with the new one (the
    database checks every charge against the current budget in any case).

    Args:
        config: the server's configuration.
        store: its database.
        rng: the noise source; None for the OS CSPRNG. Tests alone pass a
            seeded one (the results are then not private).
    """

    def __init__(self, config: ServerConfig, store: Store, rng: Randomness | None = None) -> None:
        self.config, self.store, self._rng = config, store, rng
        self._sessions: dict[tuple[str, str], _Cached] = {}
        self._lock = threading.Lock()
        for name, dataset in config.datasets.items():
            store.set_cap(name, dataset.cap)
        # A database changed outside privframe is refused before anything is served from it.
        store.verify()

    def analyst(self, authorization: str | None) -> str:
        """The analyst a request's ``Authorization`` header names, or a 401 refusal."""
        scheme, _, token = (authorization or "").partition(" ")
        analyst = self.store.authenticate(token.strip()) if scheme.lower() == "bearer" else None
        if analyst is None:
            raise RefusalError(401, "AuthenticationError", "a valid bearer token is required")
        return analyst

    def dataset(self, analyst: str, name: str) -> tuple[DatasetConfig, zCDP]:
        """The dataset and the analyst's budget on it; 404 unless it is served and granted."""
        dataset = self.config.datasets.get(name)
        budget = None if dataset is None else self.store.budget(analyst, name)
        if dataset is None or budget is None:
            raise RefusalError(404, "NotFound", f"no dataset {name[:64]!r} is granted to you")
        return dataset, budget

    def session(self, analyst: str, name: str) -> Session:
        """The analyst's Session on the dataset, opened again if its budget changed."""
        dataset, budget = self.dataset(analyst, name)
        with self._lock:
            cached = self._sessions.get((analyst, name))
            if cached is None or cached.budget != budget:
                cached = _Cached(budget, self._open(analyst, dataset, budget))
                self._sessions[(analyst, name)] = cached
            return cached.session

    def _open(self, analyst: str, dataset: DatasetConfig, budget: zCDP) -> Session:
        accountant = Accountant(budget, ledger=self.store.ledger(analyst, dataset.name))
        limits = dataset.contributions
        return Session(
            dataset.data,
            dataset.privacy_unit,
            accountant,
            rng=self._rng,
            metadata={column: Column(**facts) for column, facts in dataset.metadata.items()},
            contributions=None if limits is None else Bound(**limits),
        )

    def close(self) -> None:
        """Close the database."""
        self.store.close()


async def _body(request: HTTPRequest, limit: int) -> Any:
    """The request's JSON body, read up to ``limit`` bytes; 413 or 400 otherwise."""
    too_large = RefusalError(413, "PayloadTooLarge", f"the request body is over {limit} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (ValueError, RecursionError):
        pass
    raise RefusalError(400, "InvalidArgumentError", "the request body is not valid JSON")


def _envelope(model: type[_Body], body: Any) -> _Body:
    message = None
    try:
        parsed = model.model_validate(body)
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        message = f"the request body's {where}: {first['msg']}"
    if message is not None:
        raise RefusalError(400, "InvalidArgumentError", message)
    if parsed.version != WIRE_VERSION:
        raise RefusalError(
            400,
            "InvalidArgumentError",
            f"this server speaks wire version {WIRE_VERSION}; the client sent another: "
            "install a privframe of the server's version",
        )
    return parsed


def _error(refusal: RefusalError) -> JSONResponse:
    headers = dict(_HEADERS)
    if refusal.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    body = {"error": {"type": refusal.kind, "message": refusal.message}}
    return JSONResponse(body, status_code=refusal.status, headers=headers)


def create_app(
    config: ServerConfig, store: Store | None = None, *, rng: Randomness | None = None
) -> FastAPI:
    """The ASGI application serving ``config``'s datasets from ``store`` (its database by default).

    ``rng`` is for tests only (see :class:`Served`).
    """
    served = Served(config, store or Store(config.database), rng)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        served.close()

    app = FastAPI(
        title="privframe",
        version=str(WIRE_VERSION),
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.served = served
    limit = config.max_body_bytes

    async def answer(
        request: HTTPRequest,
        action: str,
        dataset: str | None,
        work: Callable[[str], Any],
    ) -> Response:
        analyst: str | None = None
        try:
            analyst = served.analyst(request.headers.get("authorization"))
            result = await run_in_threadpool(work, analyst)
            response: Response = (
                result if isinstance(result, Response) else JSONResponse(result, headers=_HEADERS)
            )
            status, detail = 200, ""
        except RefusalError as refused:
            status, detail, response = refused.status, refused.kind, _error(refused)
        except errors.PrivframeError as err:
            status, detail = _status(err), type(err).__name__
            response = _error(RefusalError(status, detail, str(err)))
        except Exception as err:  # a bug: its message may hold anything, so none is sent or kept
            status, detail = 500, type(err).__name__
            response = _error(RefusalError(500, "InternalError", "the server failed"))
        asked = getattr(request.state, "asked", "")
        try:
            await run_in_threadpool(
                served.store.audit,
                analyst=analyst,
                action=action,
                dataset=dataset,
                status=status,
                detail="; ".join(part for part in (asked, detail) if part),
            )
        except errors.PrivframeError:
            # Every answer is audited: one that cannot be is not given.
            return _error(RefusalError(503, "ServerError", "the audit log cannot be written"))
        return response

    @app.get("/v1/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "version": WIRE_VERSION}

    @app.get("/v1/datasets")
    async def datasets(request: HTTPRequest) -> Response:
        def work(analyst: str) -> Any:
            served_names = config.datasets
            return {"datasets": [n for n in served.store.granted(analyst) if n in served_names]}

        return await answer(request, "datasets", None, work)

    @app.get("/v1/datasets/{name}")
    async def describe(request: HTTPRequest, name: str) -> Response:
        def work(analyst: str) -> Any:
            session = served.session(analyst, name)
            dataset = config.datasets[name]
            return {
                "name": name,
                "privacy_unit": session.privacy_unit,
                "schema": encode_schema(session.check(Plan())),
                "metadata": _metadata(dataset),
                "contributions": dataset.contributions,
                "version": WIRE_VERSION,
            }

        return await answer(request, "describe", name, work)

    @app.get("/v1/datasets/{name}/budget")
    async def budget(request: HTTPRequest, name: str) -> Response:
        return await answer(
            request, "budget", name, lambda analyst: encode_report(served.session(analyst, name))
        )

    @app.get("/v1/datasets/{name}/view")
    async def view(request: HTTPRequest, name: str) -> Response:
        def work(analyst: str) -> Any:
            return HTMLResponse(session_html(served.session(analyst, name)), headers=_HEADERS)

        return await answer(request, "view", name, work)

    @app.post("/v1/datasets/{name}/check")
    async def check(request: HTTPRequest, name: str) -> Response:
        async def run() -> Callable[[str], Any]:
            body = _envelope(_PlanBody, await _body(request, limit))

            def work(analyst: str) -> Any:
                session = served.session(analyst, name)
                plan = decode_plan_query(body.plan, session.query()).plan
                return {"schema": encode_schema(session.check(plan, body.with_error))}

            return work

        return await _with_body(answer, request, "check", name, run)

    @app.post("/v1/datasets/{name}/explain")
    async def explain(request: HTTPRequest, name: str) -> Response:
        async def run() -> Callable[[str], Any]:
            body = _envelope(_ExplainBody, await _body(request, limit))

            def work(analyst: str) -> Any:
                session = served.session(analyst, name)
                asked = decode_request(body.request, session)
                plan = asked.query.plan
                explanation = session.explain(plan, asked.rho, asked.weights, asked.delta)
                delta = session.pipeline.selection_delta(plan, asked.delta)
                return {
                    "affordable": encode_number(session.accountant.affordable(asked.rho)),
                    "delta": None if delta is None else encode_number(delta),
                    "reporting_delta": encode_number(session.accountant.delta),
                    "has_unit": session.privacy_unit is not None,
                    "cost": _zcdp(explanation.plan.cost),
                }

            return work

        return await _with_body(answer, request, "explain", name, run)

    @app.post("/v1/datasets/{name}/release")
    async def release(request: HTTPRequest, name: str) -> Response:
        async def run() -> Callable[[str], Any]:
            body = _envelope(_ReleaseBody, await _body(request, limit))

            def work(analyst: str) -> Any:
                session = served.session(analyst, name)
                requests = [decode_request(r, session) for r in body.requests]
                asked = sum((exact("rho", r.rho) for r in requests), Fraction(0))
                request.state.asked = f"rho={encode_number(asked)}"
                batch = session.batch(requests)
                tables = batch.release()
                return {
                    # A Session over a file releases polars tables.
                    "tables": [encode_table(table) for table in tables],
                    "entries": [entry.to_dict() for entry in batch.entries],
                }

            return work

        return await _with_body(answer, request, "release", name, run)

    @app.get("/dashboard")
    async def dashboard() -> Response:
        return HTMLResponse(DASHBOARD_HTML, headers={**_HEADERS, **_PAGE_POLICY})

    @app.get("/dashboard.js")
    async def dashboard_script() -> Response:
        return Response(DASHBOARD_JS, media_type="text/javascript", headers=_HEADERS)

    return app


_PAGE_POLICY = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
        "img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )
}


async def _with_body(
    answer: Callable[..., Any],
    request: HTTPRequest,
    action: str,
    name: str,
    run: Callable[[], Any],
) -> Response:
    """``answer`` for a route with a body: reading and checking it may refuse first."""
    try:
        work = await run()
    except RefusalError as refusal:
        failed = refusal

        def work(analyst: str) -> Any:
            raise failed

    return await answer(request, action, name, work)


def serve(config: ServerConfig) -> None:
    """Serve ``config`` with uvicorn until interrupted (``privframe serve``).

    HTTPS when the configuration gives a certificate and key. uvicorn's own
    access log is off: the audit log in the database records every request
    without its body, and no line of either holds a data value.
    """
    import uvicorn  # the server's extra

    app = create_app(config)
    names = ", ".join(config.datasets)
    print(
        f"privframe: serving {names} on {config.scheme}://{config.host}:{config.port} "
        f"(budget dashboard: /dashboard); Ctrl-C stops",
        flush=True,
    )
    uvicorn.run(
        app,
        host=config.host,
        port=config.port,
        ssl_certfile=None if config.certificate is None else str(config.certificate),
        ssl_keyfile=None if config.key is None else str(config.key),
        log_level="warning",
        access_log=False,
        server_header=False,
    )
