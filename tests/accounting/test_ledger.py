"""Tests for privframe.accounting.ledger: ledger entries and the in-memory ledger."""

from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction

import pytest

from privframe.accounting.accountant import Spend
from privframe.accounting.budgets import zCDP
from privframe.accounting.ledger import (
    Ledger,
    LedgerEntry,
)
from privframe.errors import (
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    LedgerError,
)

T0 = "2024-01-01T00:00:00.000000+00:00"


def _entry(**kw: object) -> LedgerEntry:
    base: dict[str, object] = {
        "index": 0,
        "time": T0,
        "label": "q",
        "rho": 0.1,
        "delta": 0.0,
        "description": {"query": "count", "bounds": [0, 1.5]},
        "seeded": False,
    }
    base.update(kw)
    return LedgerEntry(**base)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- LedgerEntry


class TestLedgerEntry:
    def test_is_immutable(self) -> None:
        e = _entry()
        with pytest.raises(dataclasses.FrozenInstanceError):
            e.rho = 0.0  # type: ignore[misc]
        with pytest.raises(TypeError):
            e.description["query"] = "sum"  # type: ignore[index]
        assert e.description["bounds"] == (0, 1.5)

    def test_description_is_copied(self) -> None:
        d = {"query": "count", "keys": ["a"]}
        e = _entry(description=d)
        d["query"] = "changed"
        d["keys"].append("b")
        assert e.description == {"query": "count", "keys": ("a",)}

    def test_roundtrip_dict_and_json(self) -> None:
        e = _entry(rho=0.30000000000000004, delta=5e-324, seeded=True)
        d = e.to_dict()
        assert d["description"] == {"query": "count", "bounds": [0, 1.5]}
        again = LedgerEntry.from_dict(json.loads(json.dumps(d)))
        assert again == e
        assert again.rho == 0.30000000000000004
        assert again.delta == 5e-324
        assert hash(again) == hash(e)

    def test_schema_one_floats_roundtrip_at_their_binary_value(self) -> None:
        e = _entry(rho=0.1, delta=1e-9, legacy_floats=True)
        assert e.exact_rho == Fraction(0.1) > Fraction(1, 10)  # what that privframe charged
        d = e.to_dict()
        assert (d["rho"], d["delta"]) == ((0.1).hex(), (1e-9).hex())
        assert json.loads(e.canonical_json())["rho"] == (0.1).hex()  # the hash it was given
        assert LedgerEntry.from_dict(d) == e
        old = {**d, "rho": 0.1, "delta": 1e-9}  # a to_dict() of schema 1: plain floats
        assert LedgerEntry.from_dict(old) == e
        with pytest.raises(InvalidArgumentError, match="floats"):
            _entry(rho=Fraction(1, 10), legacy_floats=True)

    @pytest.mark.parametrize(
        ("rho", "delta"),
        [("0.1", "0/1"), ("2/4", "0/1"), ("1/10", 0.0), ("0x1.8p-1", "0/1"), ("1/0", "0/1")],
    )
    def test_from_dict_refuses_other_spellings_of_a_cost(self, rho: object, delta: object) -> None:
        d = {**_entry().to_dict(), "rho": rho, "delta": delta}
        with pytest.raises(InvalidValueError, match="rho and delta"):
            LedgerEntry.from_dict(d)

    def test_string_description(self) -> None:
        e = _entry(description="plain text")
        assert e.description == "plain text"
        assert e.description_json == '"plain text"'

    @pytest.mark.parametrize(
        "description",
        [{"x": {1, 2}}, {1: "a"}, {"a": {2: "b"}}, {"a": [object()]}, 3, None, ["a"]],
    )
    def test_description_of_wrong_type(self, description: object) -> None:
        with pytest.raises(InvalidArgumentError, match="description"):
            _entry(description=description)

    @pytest.mark.parametrize(
        "description", [{"x": math.nan}, {"x": [1.0, -math.inf]}, {"a": {"b": math.inf}}]
    )
    def test_description_with_non_finite_number(self, description: object) -> None:
        with pytest.raises(InvalidValueError, match=r"description.* finite numbers only"):
            _entry(description=description)

    @pytest.mark.parametrize(
        ("field", "value"),
        [("index", "0"), ("index", True), ("time", 0), ("label", 3), ("seeded", "yes")],
    )
    def test_fields_of_wrong_type(self, field: str, value: object) -> None:
        with pytest.raises(InvalidArgumentError, match=field):
            _entry(**{field: value})

    @pytest.mark.parametrize(("rho", "delta"), [(-0.1, 0.0), (math.inf, 0.0), (0.1, 1.0)])
    def test_bad_cost(self, rho: float, delta: float) -> None:
        with pytest.raises(InvalidBudgetError):
            _entry(rho=rho, delta=delta)

    @pytest.mark.parametrize(
        "fields",
        [{"label": "q\ud800"}, {"description": {"k": "\udcff"}}, {"description": "\udcff"}],
    )
    def test_text_that_is_not_valid_unicode(self, fields: dict[str, object]) -> None:
        with pytest.raises(InvalidValueError, match="lone surrogate at position"):
            _entry(**fields)

    @pytest.mark.parametrize(
        "label",
        ["plain", "naïve ✓ 数据", 'quote " back \\ slash', "tab\tnew\nline", "\x00\x1f\u2028"],
    )
    def test_canonical_json_is_json_dumps_of_the_fields(self, label: str) -> None:
        e = _entry(label=label, description={"é": [label, 1.5], "a": None})
        expected = json.dumps(
            {
                "index": 0,
                "time": T0,
                "label": label,
                "rho": "1/10",
                "delta": "0/1",
                "description": e.description_json,
                "seeded": False,
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        assert e.canonical_json() == expected

    def test_negative_index(self) -> None:
        with pytest.raises(InvalidValueError, match="index"):
            _entry(index=-1)

    def test_from_dict_needs_exact_keys(self) -> None:
        d = _entry().to_dict()
        d["extra"] = 1
        with pytest.raises(InvalidArgumentError, match="exactly the keys"):
            LedgerEntry.from_dict(d)

    def test_canonical_json_is_deterministic(self) -> None:
        a = _entry(description={"b": 1, "a": 2})
        b = _entry(description={"a": 2, "b": 1})
        assert a.canonical_json() == b.canonical_json()
        assert json.loads(a.canonical_json())["rho"] == "1/10"  # exact, as stored


# --------------------------------------------------------------------------- in memory


class TestMemoryLedger:
    def test_append_and_totals_exact(self) -> None:
        ledger = Ledger()
        for i in range(10):
            e = ledger.append(0.1, label=f"q{i}")
            assert e.index == i
        rho, delta = ledger.totals()
        assert rho == 1  # ten tenths, exactly
        assert delta == 0
        assert len(ledger) == 10
        assert [e.label for e in ledger.entries] == [f"q{i}" for i in range(10)]
        assert ledger.path is None

    def test_check_refusal_records_nothing(self) -> None:
        ledger = Ledger()
        seen: list[tuple[Fraction, Fraction]] = []

        def refuse(rho: Fraction, delta: Fraction) -> None:
            seen.append((rho, delta))
            raise RuntimeError("no")

        ledger.append(0.5, 1e-9)
        with pytest.raises(RuntimeError):
            ledger.append(0.25, check=refuse)
        assert seen == [(Fraction(1, 2), Fraction(1, 10**9))]
        assert len(ledger) == 1

    def test_closed(self) -> None:
        ledger = Ledger()
        ledger.close()
        with pytest.raises(LedgerError, match="closed"):
            ledger.append(0.1)

    def test_negative_zero_normalised(self) -> None:
        assert math.copysign(1.0, Ledger().append(-0.0).rho) == 1.0

    def test_append_all_checks_once_and_records_all_or_nothing(self) -> None:
        ledger = Ledger()
        ledger.append(0.5, 1e-9)
        seen: list[tuple[Fraction, Fraction]] = []

        def refuse(rho: Fraction, delta: Fraction) -> None:
            seen.append((rho, delta))
            raise RuntimeError("no")

        batch = [Spend(zCDP(0.125), "a"), Spend(zCDP(0.25), "b")]
        with pytest.raises(RuntimeError):
            ledger.append_all(batch, check=refuse)
        assert seen == [(Fraction(1, 2), Fraction(1, 10**9))]
        assert len(ledger) == 1
        entries = ledger.append_all(batch, check=lambda rho, delta: seen.append((rho, delta)))
        assert seen[-1] == (Fraction(1, 2), Fraction(1, 10**9))  # once, before the batch
        assert [(e.index, e.label) for e in entries] == [(1, "a"), (2, "b")]
        assert ledger.totals()[0] == Fraction(7, 8)

    def test_append_all_refuses_a_charge_without_a_zcdp_cost(self) -> None:
        ledger = Ledger()
        with pytest.raises(InvalidArgumentError, match="charge 1 must have a zCDP cost"):
            ledger.append_all([Spend(zCDP(0.1)), 0.1])  # type: ignore[list-item]
        assert len(ledger) == 0

    def test_bad_arguments_record_nothing(self) -> None:
        ledger = Ledger()
        with pytest.raises(InvalidArgumentError, match="label"):
            ledger.append(0.1, label=3)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="seeded"):
            ledger.append(0.1, seeded="yes")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="description"):
            ledger.append(0.1, description={1: "a"})  # type: ignore[dict-item]
        with pytest.raises(InvalidValueError, match="description"):
            ledger.append(0.1, description={"x": math.nan})
        with pytest.raises(InvalidValueError, match="label holds a lone surrogate"):
            ledger.append(0.1, label="\ud800")
        assert len(ledger) == 0
