"""The package root: its version, and the public names it exports and nothing else."""

from __future__ import annotations

import importlib.metadata
import inspect
import subprocess
import sys
import types

import privframe as pf


def test_the_version_is_the_installed_distributions() -> None:
    assert pf.__version__ == importlib.metadata.version("privframe")


def test_every_exported_name_exists_and_is_documented() -> None:
    for name in pf.__all__:
        value = getattr(pf, name)
        if name != "__version__":
            assert inspect.getdoc(value), name


def test_the_three_kinds_of_budget_are_exported() -> None:
    for name in ("zCDP", "PureDP", "ApproxDP", "GDP", "Budget"):
        assert name in pf.__all__
        assert getattr(pf, name) is getattr(pf.accounting, name)
    assert repr(pf.PureDP(epsilon=0.5)) == "PureDP(epsilon=0.5)"


def test_the_root_exports_no_internals() -> None:
    internals = {"Spend", "Batch", "Accountant", "Balance", "LedgerEntries", "spark", "planner"}
    assert internals.isdisjoint(pf.__all__)
    assert pf.accounting.Accountant.__module__ == "privframe.accounting.accountant"


def test_every_module_the_root_exposes_is_exported() -> None:
    # A submodule reached as pf.X must be one the docs promise, listed in __all__;
    # the packages of the layers (api, plan, ...) are reached by their import paths.
    layers = {"accounting", "api", "plan", "engines", "mechanisms", "synth", "errors", "numeric"}
    exposed = {n for n, v in vars(pf).items() if isinstance(v, types.ModuleType)}
    assert exposed - layers - {"_arguments", "_html"} <= set(pf.__all__)


def test_the_flat_module_paths_of_earlier_layouts_are_gone() -> None:
    # In a fresh interpreter: this one's imports do not decide what privframe registers.
    script = (
        "import sys, privframe\n"
        "old = ['privframe.noise', 'privframe.ledger', 'privframe.session', 'privframe.spark']\n"
        "print(sorted(m for m in old if m in sys.modules))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]"
