"""Plans and release requests as versioned JSON data, never code: the wire of ``privframe serve``.

A remote session (:mod:`privframe.api.client`) encodes each
:class:`~privframe.api.query.Request` with :func:`encode_request` and posts
the JSON; the server decodes it with :func:`decode_request` on its own
:class:`~privframe.Session`. Nothing on the wire is code: no pickle, no
Python callable, no polars DSL. Expressions are written in privframe's own
JSON grammar of the allow-list (:mod:`~privframe.api.wire.expressions`),
values and numbers exactly (:mod:`~privframe.api.wire.values`), and the plan
is replayed on the server through the public query builder
(:mod:`~privframe.api.wire.plan`), so every check a local query gets runs
again there. The request object is described in
:mod:`~privframe.api.wire.request`; ``marginals`` and ``synthesize`` calls,
their arguments as data, in :mod:`~privframe.api.wire.synthesis`.

A hostile request (wrong JSON types anywhere, unknown keys, ops, types or
kinds, another version, expressions nested more than :data:`MAX_DEPTH` deep
or with more than :data:`MAX_NODES` nodes, strings over :data:`MAX_STRING`
characters, lists over :data:`MAX_ITEMS` items, integers beyond Int64/UInt64,
rationals of more than 200 digits) is refused with a :class:`WireError` (a
:class:`~privframe.errors.InvalidArgumentError`) naming the JSON path of the
problem; decoding raises nothing but privframe errors, and spends nothing.

Example:
    >>> import json
    >>> import polars as pl
    >>> import privframe as pf
    >>> from privframe.api.wire import WireError, decode_request, encode_request
    >>> sess = pf.Session(pl.DataFrame({"age": [20, 15]}), None, pf.zCDP(1.0))
    >>> request = sess.query().filter(pl.col("age") >= 18).agg(pf.count()).request(0.5)
    >>> data = json.loads(json.dumps(encode_request(request)))
    >>> data["plan"]["steps"]
    [{'filter': [{'op': '>=', 'args': [{'col': 'age'}, {'lit': 18, 'type': 'int'}]}]}]
    >>> data["plan"]["steps"][0]["filter"][0]["op"] = "Foo"
    >>> try:
    ...     decode_request(data, sess)
    ... except WireError as err:
    ...     print(err)
    request.plan.steps[0].filter[0].op: unknown op 'Foo'
"""

from privframe.api.wire.expressions import decode_expression, encode_expression
from privframe.api.wire.plan import (
    decode_aggregate,
    decode_plan_query,
    encode_aggregate,
    encode_plan,
)
from privframe.api.wire.reading import (
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_NODES,
    MAX_STRING,
    WIRE_VERSION,
    WireError,
)
from privframe.api.wire.request import (
    TuneRequest,
    WireSession,
    decode_request,
    decode_tune,
    encode_request,
    encode_tune,
)
from privframe.api.wire.synthesis import (
    Call,
    decode_call,
    encode_marginals,
    encode_synthesis,
)
from privframe.api.wire.values import (
    decode_budget,
    decode_dtype,
    decode_kind,
    decode_number,
    decode_released,
    decode_schema,
    decode_table,
    encode_budget,
    encode_dtype,
    encode_kind,
    encode_number,
    encode_released,
    encode_schema,
    encode_table,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_NODES",
    "MAX_STRING",
    "WIRE_VERSION",
    "Call",
    "TuneRequest",
    "WireError",
    "WireSession",
    "decode_aggregate",
    "decode_budget",
    "decode_call",
    "decode_dtype",
    "decode_expression",
    "decode_kind",
    "decode_number",
    "decode_plan_query",
    "decode_released",
    "decode_request",
    "decode_schema",
    "decode_table",
    "decode_tune",
    "encode_aggregate",
    "encode_budget",
    "encode_dtype",
    "encode_expression",
    "encode_kind",
    "encode_marginals",
    "encode_number",
    "encode_plan",
    "encode_released",
    "encode_request",
    "encode_schema",
    "encode_synthesis",
    "encode_table",
    "encode_tune",
]
