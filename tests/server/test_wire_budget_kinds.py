"""The wire form of a pure-DP or (ε, δ) release: epsilon instead of rho, budgets by their keys.

A zCDP request is what it was before epsilon could be sent (wire version 1,
``rho``), so older clients and servers read it; a request spends exactly one
of ``rho`` and ``epsilon``, and the server's session refuses the one its
grant does not spend.
"""

from __future__ import annotations

import json
from fractions import Fraction

import polars as pl
import pytest

import privframe as pf
from privframe.api.wire import (
    WIRE_VERSION,
    WireError,
    decode_budget,
    decode_kind,
    decode_request,
    encode_budget,
    encode_kind,
    encode_request,
)

DATA = pl.DataFrame({"u": [1, 2, 3], "x": [1.0, 2.0, 3.0]})


def _session(budget: pf.zCDP | pf.PureDP | pf.ApproxDP) -> pf.Session:
    return pf.Session(
        DATA,
        "u",
        budget,
        metadata={"x": pf.Column(bounds=(0, 5))},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
    )


def _wire(data: dict[str, object]) -> dict[str, object]:
    return json.loads(json.dumps(data))  # type: ignore[no-any-return]


def test_a_zcdp_request_has_the_keys_it_always_had() -> None:
    sess = _session(pf.zCDP(1.0))
    data = _wire(encode_request(sess.query().agg(pf.count()).request(0.25, delta=None)))
    assert data["version"] == WIRE_VERSION == 1
    assert set(data) == {"version", "plan", "rho"}


@pytest.mark.parametrize(
    "budget", [pf.PureDP(1.0), pf.ApproxDP(1.0, 1e-6)], ids=lambda b: type(b).__name__
)
def test_an_epsilon_request_round_trips_exactly(budget: pf.PureDP | pf.ApproxDP) -> None:
    sess = _session(budget)
    delta = {"delta": Fraction(1, 10**7)} if isinstance(budget, pf.ApproxDP) else {}
    request = sess.query().bound(max_rows=1).agg(pf.count()).request(epsilon=0.1, **delta)
    data = _wire(encode_request(request))
    assert data["epsilon"] == "1/10"
    assert "rho" not in data
    decoded = decode_request(data, sess)
    assert (decoded.rho, decoded.epsilon, decoded.options.delta) == (
        None,
        Fraction(1, 10),
        delta.get("delta"),
    )
    assert sess.release_all([decoded])[0].columns == ["count"]
    assert sess.spent == type(budget)(0.1, **delta)  # type: ignore[call-arg]


def test_a_request_spends_exactly_one_of_rho_and_epsilon() -> None:
    sess = _session(pf.PureDP(1.0))
    data = _wire(encode_request(sess.query().agg(pf.count()).request(epsilon=0.1)))
    with pytest.raises(WireError, match=r"^request: give exactly one of 'rho' and 'epsilon'"):
        decode_request({**data, "rho": "1/10"}, sess)
    without = {k: v for k, v in data.items() if k != "epsilon"}
    with pytest.raises(WireError, match=r"^request: missing key 'rho' \(or 'epsilon'"):
        decode_request(without, sess)
    with pytest.raises(WireError, match=r"^request\.epsilon: expected an exact rational"):
        decode_request({**data, "epsilon": 0.1}, sess)
    # The session refuses the other parameter when the request is released, as locally.
    request = decode_request({**without, "rho": "1/10"}, sess)
    with pytest.raises(pf.InvalidArgumentError, match="not rho"):
        sess.release_all([request])
    assert sess.ledger == ()


def test_sql_options_must_spend_the_epsilon_that_was_sent() -> None:
    sess = _session(pf.ApproxDP(1.0, 1e-6))
    text = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5, delta=1e-7) COUNT(*) AS n FROM data"
    )
    encoded = _wire(encode_request(sess.parse_sql(text).request()))
    assert (encoded["epsilon"], encoded["delta"]) == ("1/2", "1/10000000")
    assert decode_request(encoded, sess).epsilon == Fraction(1, 2)
    with pytest.raises(WireError, match=r"^request\.epsilon: the query's OPTIONS spend"):
        decode_request({**encoded, "epsilon": "1/4"}, sess)
    rho = {k: v for k, v in encoded.items() if k != "epsilon"} | {"rho": "1/2"}
    with pytest.raises(WireError, match=r"not the rho=1/2 and delta"):
        decode_request(rho, sess)


def test_budgets_and_kinds_travel_by_their_names() -> None:
    for budget in (pf.zCDP(0.5, 1e-9), pf.PureDP(Fraction(1, 3)), pf.ApproxDP(2, 1e-6)):
        assert decode_budget(_wire(encode_budget(budget))) == budget
        assert decode_kind(encode_kind(type(budget))) is type(budget)
    with pytest.raises(WireError, match="expected rho and delta, epsilon, or epsilon and delta"):
        decode_budget({"rho": "1"})
    with pytest.raises(WireError, match="unknown key 'mu'"):
        decode_budget({"mu": "1"})
    with pytest.raises(WireError, match=r"report\.budget: .*delta"):
        decode_budget({"epsilon": "1", "delta": "2"}, "report.budget")
    with pytest.raises(WireError, match="unknown budget kind 'gdp'"):
        decode_kind("gdp")
