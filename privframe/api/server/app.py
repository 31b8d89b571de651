r"""The server's HTTP API: each analyst's plans, rebuilt and released on the data it never sees.

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

Every answer other than 200 is ``{"error": {"type", "message"}}``, the
framework's own (an unknown route, a method a route does not take, an
invalid query parameter, an unhandled exception) included: the type is a
:mod:`privframe.errors` class the client raises again, and the message is the
library's own, which never holds a data value nor repeats the request (but for
the planner's SQL errors, which name the construct of the analyst's own text
they refuse, as a local parse does). Every request, answered or
refused, is one record of the audit log, holding its route, status, the
budget a release asked (ρ, or ε and δ), and the error type only.

==============================  ==========================================
``GET  /v1/datasets``           the datasets granted to the analyst
``GET  /v1/datasets/{name}``    its public schema, metadata and limits
``GET  /v1/datasets/{name}/budget``  budget report and ledger (own only)
``GET  /v1/datasets/{name}/view``    the notebook view of the budget (HTML)
``GET  /v1/datasets/{name}/dashboard``  the dashboard's section of it (HTML)
``POST /v1/datasets/{name}/plan``    the budget planner for an SQL query (HTML): spends nothing
``POST /v1/datasets/{name}/check``   a plan against the public schema
``POST /v1/datasets/{name}/explain`` the public facts an explanation needs
``POST /v1/datasets/{name}/release`` requests, released all or nothing
``POST /v1/datasets/{name}/tune``    ``query.tune``: charged, answers the tuned plan
``POST /v1/datasets/{name}/marginals``  ``Session.marginals``: charged, or explained
``POST /v1/datasets/{name}/synthesize`` ``Session.synthesize``: charged, or explained
``GET  /dashboard``             the budget dashboard page
==============================  ==========================================

The work behind each route is :class:`~privframe.api.server.served.Served`'s.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> import privframe as pf
    >>> from fastapi.testclient import TestClient
    >>> from privframe.api.server.app import create_app
    >>> from privframe.api.server.config import load_config
    >>> folder = Path(tempfile.mkdtemp())
    >>> pf.datasets.synthetic_transactions(1_000).write_parquet(folder / "t.parquet")
    >>> _ = (folder / "serve.toml").write_text(
    ...     '[datasets.t]\ndata = "t.parquet"\nprivacy_unit = "user_id"\n')
    >>> with TestClient(create_app(load_config(folder / "serve.toml"))) as http:
    ...     answer = http.get("/v1/datasets", headers={"Authorization": "Bearer pf_x"})
    >>> answer.status_code, answer.json()["error"]["type"]
    (401, 'ServerError')
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pydantic
from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from polars.exceptions import PanicException
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from privframe import errors
from privframe.api.server.config import ServerConfig
from privframe.api.server.dashboard import DASHBOARD_HTML, DASHBOARD_JS
from privframe.api.server.served import RefusalError, Served
from privframe.api.server.store import Store
from privframe.api.wire import WIRE_VERSION
from privframe.mechanisms.noise import Randomness

__all__ = ["create_app", "public_error", "serve"]

_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_PAGE_POLICY = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
        "img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )
}
_FAILED = RefusalError(500, "ServerError", "the server failed")
_FRAMEWORK = {
    404: "there is no such route; the routes are listed in docs/server.md (The HTTP API)",
    405: "this route does not take this method; the routes are listed in docs/server.md",
}
"""The refusals the framework makes before a route runs, in privframe's own words: its
default bodies, ``{"detail": ...}``, repeat the request's input for a validation error."""
_MAX_REQUESTS = 64
"""The most requests one release body may hold (a report's queries)."""
_DATABASE_DOWN = (
    "the server's database is busy or unavailable; nothing was released. Retry, or tell "
    "the data owner"
)


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


class _Envelope(_Strict):
    """A body in the client's wire format, whose version must be the server's."""

    version: int


_Body = TypeVar("_Body", bound=_Strict)


class _PlannerBody(_Strict):
    """The dashboard's planner: no wire version, as the page comes from the server itself."""

    sql: str
    rho: float | None = None
    epsilon: float | None = None


class _PlanBody(_Envelope):
    plan: dict[str, Any]
    with_error: bool = False


class _ExplainBody(_Envelope):
    request: dict[str, Any]


class _TuneBody(_Envelope):
    tune: dict[str, Any]


class _MarginalsBody(_Envelope):
    marginals: dict[str, Any]
    explain: bool = False


class _SynthesizeBody(_Envelope):
    synthesize: dict[str, Any]
    explain: bool = False


class _ReleaseBody(_Envelope):
    requests: list[dict[str, Any]] = pydantic.Field(min_length=1, max_length=_MAX_REQUESTS)


def public_error(err: errors.PrivframeError) -> RefusalError:
    """What a client is told of a refusal: the nearest error class of :mod:`privframe.errors`.

    The library's messages hold no data values, so they are sent as they
    are, with an SQL error's construct and position; a database failure's
    message (paths, hosts, driver text) is kept from the client.

    Example:
        >>> from privframe.api.server.app import public_error
        >>> from privframe.api.wire import WireError
        >>> refusal = public_error(WireError("request.rho: expected a ratio"))
        >>> refusal.status, refusal.kind
        (400, 'InvalidArgumentError')
    """
    kind = next(c.__name__ for c in type(err).__mro__ if getattr(errors, c.__name__, None) is c)
    if isinstance(err, errors.BudgetExceededError):
        return RefusalError(409, kind, str(err))
    if isinstance(err, errors.LedgerError):
        return RefusalError(503, kind, _DATABASE_DOWN)
    if isinstance(err, errors.SQLError):
        return RefusalError(400, kind, str(err), construct=err.construct, position=err.position)
    return RefusalError(400, kind, str(err))


async def _body(request: HTTPRequest, limit: int) -> Any:
    """The request's JSON body, read up to ``limit`` bytes; 413 or 400 otherwise."""
    too_large = RefusalError(413, "ServerError", f"the request body is over {limit} bytes")
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
        if first["type"] == "extra_forbidden":  # its location is the analyst's own key
            message = (
                "the request body has a field this route does not take; it takes "
                + ", ".join(model.model_fields)
            )
        elif first["loc"]:  # the model's field names and list positions; never its input
            where = ".".join(str(part) for part in first["loc"])
            message = f"the request body's {where}: {first['msg']}"
        else:
            message = "the request body must be a JSON object"
    if message is not None:
        raise RefusalError(400, "InvalidArgumentError", message)
    if isinstance(parsed, _Envelope) and parsed.version != WIRE_VERSION:
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
    body = {"error": {"type": refusal.kind, "message": refusal.message, **refusal.fields}}
    return JSONResponse(body, status_code=refusal.status, headers=headers)


async def _answer(
    served: Served,
    request: HTTPRequest,
    action: str,
    dataset: str | None,
    work: Callable[[str, Any, dict[str, str]], Any],
    model: type[_Strict] | None = None,
) -> Response:
    """Authenticate, read the body, run ``work`` off the event loop, audit, answer.

    Everything that touches the database or the data runs in the thread
    pool: a slow database or a long release never holds up other requests.
    The token is checked before the body is read.
    """
    analyst: str | None = None
    noted: dict[str, str] = {}
    try:
        analyst = await run_in_threadpool(served.analyst, request.headers.get("authorization"))
        body = (
            None
            if model is None
            else _envelope(model, await _body(request, served.config.max_body_bytes))
        )
        result = await run_in_threadpool(work, analyst, body, noted)
        response: Response = (
            result if isinstance(result, Response) else JSONResponse(result, headers=_HEADERS)
        )
        status, kind = 200, ""
    except RefusalError as refused:
        status, kind, response = refused.status, refused.kind, _error(refused)
    except errors.PrivframeError as err:
        public = public_error(err)
        status, kind, response = public.status, type(err).__name__, _error(public)
    except (Exception, PanicException) as err:  # a bug: its message may hold anything
        status, kind = 500, type(err).__name__
        response = _error(_FAILED)
    detail = "; ".join(part for part in (noted.get("asked", ""), kind) if part)
    try:
        await run_in_threadpool(
            served.store.audit,
            analyst=analyst,
            action=action,
            dataset=dataset,
            status=status,
            detail=detail,
        )
    except errors.PrivframeError:
        # Every answer is audited: one that cannot be is not given.
        return _error(RefusalError(503, "ServerError", "the audit log cannot be written"))
    return response


def create_app(
    config: ServerConfig, store: Store | None = None, *, rng: Randomness | None = None
) -> FastAPI:
    """The ASGI application serving ``config``'s datasets from ``store`` (its database by default).

    ``rng`` is for tests only (see :class:`~privframe.api.server.served.Served`).
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

    @app.exception_handler(StarletteHTTPException)
    async def framework_refusal(_: HTTPRequest, err: StarletteHTTPException) -> Response:
        message = _FRAMEWORK.get(err.status_code, f"the request was refused ({err.status_code})")
        response = _error(RefusalError(err.status_code, "ServerError", message))
        response.headers.update(err.headers or {})  # 405's Allow
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_parameter(_: HTTPRequest, err: RequestValidationError) -> Response:
        first = err.errors()[0]  # a declared parameter's name and pydantic's words, no input
        where = " ".join(str(part) for part in first["loc"])
        message = f"the request's {where}: {first['msg']}"
        return _error(RefusalError(400, "InvalidArgumentError", message))

    @app.exception_handler(Exception)
    async def failure(_: HTTPRequest, __: Exception) -> Response:
        return _error(_FAILED)  # a bug outside a route's work: its message may hold anything

    @app.get("/v1/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "version": WIRE_VERSION}

    @app.get("/v1/datasets")
    async def datasets(request: HTTPRequest) -> Response:
        return await _answer(served, request, "datasets", None, lambda a, _, __: served.granted(a))

    @app.get("/v1/datasets/{name}")
    async def describe(request: HTTPRequest, name: str) -> Response:
        work = lambda a, _, __: served.describe(a, name)  # noqa: E731
        return await _answer(served, request, "describe", name, work)

    @app.get("/v1/datasets/{name}/budget")
    async def budget(request: HTTPRequest, name: str, entries: bool = True) -> Response:
        work = lambda a, _, __: served.budget(a, name, entries)  # noqa: E731
        return await _answer(served, request, "budget", name, work)

    @app.get("/v1/datasets/{name}/view")
    async def view(request: HTTPRequest, name: str) -> Response:
        def work(analyst: str, _: Any, __: Any) -> Response:
            return HTMLResponse(served.view(analyst, name), headers=_HEADERS)

        return await _answer(served, request, "view", name, work)

    @app.get("/v1/datasets/{name}/dashboard")
    async def dashboard_section(request: HTTPRequest, name: str) -> Response:
        def work(analyst: str, _: Any, __: Any) -> Response:
            return HTMLResponse(served.dashboard(analyst, name), headers=_HEADERS)

        return await _answer(served, request, "dashboard", name, work)

    @app.post("/v1/datasets/{name}/plan")
    async def plan(request: HTTPRequest, name: str) -> Response:
        work = lambda a, body, _: served.plan(a, name, body.sql, body.rho, body.epsilon)  # noqa: E731
        return await _answer(served, request, "plan", name, work, _PlannerBody)

    @app.post("/v1/datasets/{name}/check")
    async def check(request: HTTPRequest, name: str) -> Response:
        work = lambda a, body, _: served.check(a, name, body.plan, body.with_error)  # noqa: E731
        return await _answer(served, request, "check", name, work, _PlanBody)

    @app.post("/v1/datasets/{name}/explain")
    async def explain(request: HTTPRequest, name: str) -> Response:
        work = lambda a, body, _: served.explain(a, name, body.request)  # noqa: E731
        return await _answer(served, request, "explain", name, work, _ExplainBody)

    @app.post("/v1/datasets/{name}/release")
    async def release(request: HTTPRequest, name: str) -> Response:
        work = lambda a, body, noted: served.release(a, name, body.requests, noted)  # noqa: E731
        return await _answer(served, request, "release", name, work, _ReleaseBody)

    @app.post("/v1/datasets/{name}/tune")
    async def tune(request: HTTPRequest, name: str) -> Response:
        work = lambda a, body, noted: served.tune(a, name, body.tune, noted)  # noqa: E731
        return await _answer(served, request, "tune", name, work, _TuneBody)

    @app.post("/v1/datasets/{name}/marginals")
    async def marginals(request: HTTPRequest, name: str) -> Response:
        def work(analyst: str, body: _MarginalsBody, noted: dict[str, str]) -> Any:
            return served.synthetic(analyst, name, "marginals", body.marginals, body.explain, noted)

        return await _answer(served, request, "marginals", name, work, _MarginalsBody)

    @app.post("/v1/datasets/{name}/synthesize")
    async def synthesize(request: HTTPRequest, name: str) -> Response:
        def work(analyst: str, body: _SynthesizeBody, noted: dict[str, str]) -> Any:
            return served.synthetic(
                analyst, name, "synthesize", body.synthesize, body.explain, noted
            )

        return await _answer(served, request, "synthesize", name, work, _SynthesizeBody)

    @app.get("/dashboard")
    async def dashboard() -> Response:
        return HTMLResponse(DASHBOARD_HTML, headers={**_HEADERS, **_PAGE_POLICY})

    @app.get("/dashboard.js")
    async def dashboard_script() -> Response:
        return Response(DASHBOARD_JS, media_type="text/javascript", headers=_HEADERS)

    return app


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
