"""The server's configuration is checked whole before anything starts; refusals name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

import privframe as pf
from privframe.api.server.config import load_config
from privframe.api.spec_values import SpecError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

DATASET = """
[datasets.sales]
data = "sales.parquet"
privacy_unit = "customer"
"""


def _load(folder: Path, text: str) -> object:
    path = folder / "serve.toml"
    path.write_text(text)
    return load_config(path)


def test_the_example_configuration_loads() -> None:
    config = load_config(EXAMPLES / "serve.toml")
    dataset = config.datasets["transactions"]
    assert (config.host, config.port, config.scheme) == ("127.0.0.1", 8765, "http")
    assert dataset.cap == pf.zCDP(4.0)
    assert dataset.contributions == {"max_groups": 3, "max_rows_per_group": 5}
    assert dataset.metadata["region"] == {"keys": ["north", "south", "east", "west"]}
    assert config.database == str(EXAMPLES / "privframe.db")


def test_plain_http_off_the_loopback_interface_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"server\.host = '0\.0\.0\.0' is reachable"):
        _load(tmp_path, '[server]\nhost = "0.0.0.0"\n' + DATASET)
    insecure = _load(tmp_path, '[server]\nhost = "0.0.0.0"\ninsecure_http = true\n' + DATASET)
    assert insecure.host == "0.0.0.0"  # type: ignore[attr-defined]
    tls = _load(
        tmp_path, '[server]\nhost = "0.0.0.0"\ncertificate = "c.pem"\nkey = "k.pem"\n' + DATASET
    )
    assert tls.scheme == "https"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[server]\ncertificate = "c.pem"\n' + DATASET, "give both certificate and key"),
        ("[server]\nport = 70000\n" + DATASET, r"server.port must be in \[0, 65535\]"),
        ('[server]\nhots = "x"\n' + DATASET, "server: unknown key 'hots'"),
        ("[server]\nmax_body_bytes = 10\n" + DATASET, "at least 1024"),
        ("[datasets]\n", "give at least one"),
        ('[datasets."bad name!"]\ndata = "x"\nprivacy_unit = "u"\n', "not a valid name"),
        ('[datasets.sales]\ndata = "x"\n', "missing the required key 'privacy_unit'"),
        (DATASET + "cap = { rho = -1 }\n", r"datasets.sales.cap.rho must be > 0"),
        (DATASET + "cap = { epsilon = 0 }\n", r"datasets.sales.cap.epsilon must be > 0"),
        (DATASET + "cap = { epsilon = 1, rho = 1 }\n", r"datasets.sales.cap: give rho"),
        (DATASET + "contributions = { max_groups = 2 }\n", "a person's row limit"),
        (DATASET + "metadata.amount = { bounds = [0] }\n", r"must be \[lower, upper\]"),
        (
            DATASET + 'metadata.amount = { type = "int32" }\n',
            r"metadata.amount.type: Column type 'int32' is not one",
        ),
    ],
)
def test_a_wrong_key_or_value_is_refused_by_name(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        _load(tmp_path, text)


@pytest.mark.parametrize(
    ("cap", "budget"),
    [
        ("{ rho = 2, delta = 1e-9 }", pf.zCDP(2, 1e-9)),
        ("{ mu = 2 }", pf.zCDP(2)),
        ("{ epsilon = 1 }", pf.PureDP(1)),
        ("{ epsilon = 1, delta = 1e-6 }", pf.ApproxDP(1, 1e-6)),
    ],
)
def test_a_cap_is_read_in_its_kind(tmp_path: Path, cap: str, budget: object) -> None:
    config = _load(tmp_path, DATASET + f"cap = {cap}\n")
    assert config.datasets["sales"].cap == budget  # type: ignore[attr-defined]
