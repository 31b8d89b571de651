"""ε and wall time of DP-SGD accounting: privframe against dp_accounting and Opacus.

For a few DP-SGD runs (Poisson sampling rate q, noise multiplier σ, steps) and
one plain Gaussian composition, at δ = 1e-5, each accountant reports ε and the
seconds it took; then each library searches the noise multiplier that meets a
target ε. Accountants:

* privframe RDP: ``privframe.accounting.rdp.RDPAccountant``.
* privframe PLD: ``privframe.accounting.pld.PLDAccountant`` (pessimistic ε, grid 1e-4),
  with its certified bracket ``epsilon_bounds``.
* dp_accounting RDP and PLD: ``RdpAccountant`` and ``pld.PLDAccountant``
  (grid 1e-4, connect-the-dots), dp-accounting 0.6.
* Opacus RDP and PRV: ``opacus.accountants.RDPAccountant`` and
  ``PRVAccountant`` with ``history = [(σ, q, steps)]``, as Opacus'
  ``get_noise_multiplier`` sets it; the Gaussian composition is q = 1.

The noise-multiplier search: privframe ``dpsgd_noise_multiplier`` (RDP and
PLD), dp_accounting ``calibrate_dp_mechanism`` (RDP and PLD accountants) and
Opacus ``get_noise_multiplier`` (``accountant="rdp"`` and ``"prv"``), each with
its own default tolerance, which the table states.

Each library runs in its own subprocess: privframe in this interpreter, the
peers in their virtualenvs (``peers.py``: ``dp_accounting``, ``opacus``),
each timing ``--repeat`` runs of every case on a fresh accountant. "first s"
is the first run in the process (lazy imports and caches cold), "min s" the
fastest of all runs. Imports are outside the timer; the notes give their
seconds (Opacus imports torch).

Usage:
    python benchmarks/bench_accounting.py [--quick] [--repeat 3] \\
        [--peers dp_accounting,opacus] [--skip-missing]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import peers  # noqa: E402  (a sibling script, not a package)
from compare import machine  # noqa: E402

DELTA = 1e-5
PEER_NAMES = ("dp_accounting", "opacus")
LIBRARIES = ("privframe", *PEER_NAMES)
LABELS = {
    ("privframe", "rdp"): "privframe RDP",
    ("privframe", "pld"): "privframe PLD",
    ("dp_accounting", "rdp"): "dp_accounting RDP",
    ("dp_accounting", "pld"): "dp_accounting PLD",
    ("opacus", "rdp"): "Opacus RDP",
    ("opacus", "prv"): "Opacus PRV",
}
METHODS = {"privframe": ("rdp", "pld"), "dp_accounting": ("rdp", "pld"), "opacus": ("rdp", "prv")}
TOLERANCE = {
    "privframe": "rtol 1e-6 on σ",
    "dp_accounting": "tol 1e-6 on σ",
    "opacus": "ε within 0.01 below target",
}


def dpsgd(q: float, sigma: float, steps: int) -> dict[str, Any]:
    return {"kind": "dpsgd", "q": q, "sigma": sigma, "steps": steps}


def gaussian(sigma: float, count: int) -> dict[str, Any]:
    return {"kind": "gaussian", "sigma": sigma, "steps": count}


SETTINGS = [
    dpsgd(0.01, 1.1, 1000),
    dpsgd(0.01, 1.1, 10000),
    dpsgd(0.001, 0.8, 1000),
    dpsgd(0.001, 0.8, 10000),
    gaussian(2.0, 100),
]
QUICK_SETTINGS = [dpsgd(0.01, 1.1, 1000), gaussian(2.0, 100)]
# Noise-multiplier searches: (target ε, q, steps).
SEARCHES = [
    {"epsilon": 2.0, "q": 0.01, "steps": 1000},
    {"epsilon": 1.0, "q": 0.001, "steps": 10000},
]
QUICK_SEARCHES = SEARCHES[:1]

# -- code run inside every subprocess ------------------------------------------------------

# The timer and the case loop, shared by all libraries. Each library's snippet
# defines VERSION, IMPORT_S, EPSILON = {method: fn(case) -> ε}, SEARCH =
# {method: fn(target ε, δ, q, steps) -> σ}, and may define EXTRA = {method:
# fn(case) -> dict} for values reported in the notes (untimed).
DRIVER = r"""
def _timed(fn, *args):
    times, value = [], None
    for _ in range(CFG["repeat"]):
        gc.collect()
        t0 = time.perf_counter()
        value = fn(*args)
        times.append(time.perf_counter() - t0)
    return {"value": float(value), "first": times[0], "min": min(times)}


def _guard(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # a case that fails is reported, the others still run
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}


out = {"version": VERSION, "import_s": IMPORT_S, "skipped": SKIPPED, "eps": {}, "search": {}}
for method, fn in EPSILON.items():
    for i, case in enumerate(CFG["cases"]):
        r = out["eps"][f"{method}|{i}"] = _guard(_timed, fn, case)
        if "error" not in r and method in EXTRA:
            r["extra"] = _guard(EXTRA[method], case)
for method, fn in SEARCH.items():
    for i, s in enumerate(CFG["searches"]):
        r = out["search"][f"{method}|{i}"] = _guard(
            _timed, fn, s["epsilon"], CFG["delta"], s["q"], s["steps"]
        )
        if "error" not in r:
            case = {"kind": "dpsgd", "q": s["q"], "sigma": r["value"], "steps": s["steps"]}
            r["epsilon"] = _guard(lambda: float(EPSILON[method](case)))
print(json.dumps(out))
"""

PREAMBLE = r"""
import gc, importlib.metadata, json, sys, time, warnings

CFG = json.loads(sys.argv[1])
DELTA = CFG["delta"]
SKIPPED = {}
EXTRA = {}
_t0 = time.perf_counter()
"""

PRIVFRAME_SNIPPET = r"""
from privframe import dpsgd
from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
from privframe.accounting.pld import PLDAccountant
from privframe.accounting.rdp import RDPAccountant

IMPORT_S = time.perf_counter() - _t0
VERSION = "privframe " + importlib.metadata.version("privframe")


def _event(case):
    event = GaussianEvent(case["sigma"])
    return event if case["kind"] == "gaussian" else PoissonSampledEvent(case["q"], event)


def _eps(accountant):
    def eps(case):
        return accountant().compose(_event(case), case["steps"]).epsilon(DELTA)

    return eps


def pld_bounds(case):
    lo, hi = PLDAccountant().compose(_event(case), case["steps"]).epsilon_bounds(DELTA)
    return {"lower": lo, "upper": hi}


def _search(method):
    def search(eps, delta, q, steps):
        return dpsgd.dpsgd_noise_multiplier(eps, delta, q, steps, method=method)

    return search


EPSILON = {"rdp": _eps(RDPAccountant), "pld": _eps(PLDAccountant)}
SEARCH = {"rdp": _search("rdp"), "pld": _search("pld")}
EXTRA["pld"] = pld_bounds
"""

DP_ACCOUNTING_SNIPPET = r"""
from dp_accounting import dp_event
from dp_accounting.mechanism_calibration import calibrate_dp_mechanism
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

IMPORT_S = time.perf_counter() - _t0
VERSION = "dp-accounting " + importlib.metadata.version("dp-accounting")


def _event(sigma, q):
    event = dp_event.GaussianDpEvent(sigma)
    return event if q is None else dp_event.PoissonSampledDpEvent(q, event)


def _eps(make):
    def eps(case):
        acct = make()
        acct.compose(_event(case["sigma"], case.get("q")), case["steps"])
        return acct.get_epsilon(DELTA)

    return eps


def _search(make):
    def search(eps, delta, q, steps):
        return calibrate_dp_mechanism(
            make, lambda s: dp_event.SelfComposedDpEvent(_event(s, q), steps), eps, delta
        )

    return search


EPSILON = {"rdp": _eps(RdpAccountant), "pld": _eps(PLDAccountant)}
SEARCH = {"rdp": _search(RdpAccountant), "pld": _search(PLDAccountant)}
"""

OPACUS_SNIPPET = r"""
import torch  # imported by opacus anyway; timed here so that the notes can say so
from opacus.accountants import PRVAccountant, RDPAccountant
from opacus.accountants.utils import get_noise_multiplier

IMPORT_S = time.perf_counter() - _t0
VERSION = (
    f"opacus {importlib.metadata.version('opacus')}, torch {torch.__version__}"
)
# PRV at q = 1 takes log(0) in prvs.py on the way to a finite result.
warnings.simplefilter("ignore", RuntimeWarning)


def _eps(cls):
    def eps(case):
        acct = cls()
        acct.history = [(case["sigma"], case.get("q", 1.0), case["steps"])]
        return acct.get_epsilon(DELTA)

    return eps


def _search(name):
    def search(eps, delta, q, steps):
        return get_noise_multiplier(
            target_epsilon=eps, target_delta=delta, sample_rate=q, steps=steps, accountant=name
        )

    return search


EPSILON = {"rdp": _eps(RDPAccountant), "prv": _eps(PRVAccountant)}
SEARCH = {"rdp": _search("rdp"), "prv": _search("prv")}
"""

SNIPPETS = {
    "privframe": PRIVFRAME_SNIPPET,
    "dp_accounting": DP_ACCOUNTING_SNIPPET,
    "opacus": OPACUS_SNIPPET,
}


def run_library(name: str, cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """One library's result dict, or {"error": reason} when it cannot run."""
    code = PREAMBLE + SNIPPETS[name] + DRIVER
    try:
        if name == "privframe":
            return peers.run_python(sys.executable, code, [json.dumps(cfg)], args.timeout)
        if args.skip_missing and not peers.is_installed(name):
            return {"error": "not installed; run without --skip-missing to install"}
        return peers.run_snippet(name, code, [json.dumps(cfg)], args.timeout)
    except peers.PeerError as exc:
        return {"error": str(exc)}


def describe(case: dict[str, Any]) -> str:
    if case["kind"] == "gaussian":
        return f"Gaussian σ={case['sigma']:g} ×{case['steps']:,}"
    return f"DP-SGD q={case['q']:g} σ={case['sigma']:g} {case['steps']:,} steps"


def table(header: list[str], rows: list[list[str]], left: tuple[int, ...] = (0, 1)) -> None:
    """Print a markdown table: the columns in ``left`` left-aligned, the others right."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, None, *rows]:
        if r is None:
            dashes = ["-" * (w + 1) for w in widths]
            cells = [":" + d if i in left else d + ":" for i, d in enumerate(dashes)]
            print("|" + "|".join(cells) + "|")
            continue
        cells = [
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        print("| " + " | ".join(cells) + " |")


def _cell(r: dict[str, Any], key: str, fmt: str) -> str:
    return "n/a" if "error" in r else format(r[key], fmt)


def report(
    results: dict[str, dict[str, Any]], cfg: dict[str, Any], args: argparse.Namespace
) -> None:
    print(
        f"# DP accounting: ε at δ = {DELTA:g}, and the noise multiplier for a target ε; "
        f"{args.repeat} runs each on a fresh accountant"
    )
    print(f"# {dt.date.today().isoformat()}; {machine()}")
    rows = []
    for i, case in enumerate(cfg["cases"]):
        for lib in LIBRARIES:
            for method in METHODS[lib]:
                r = results[lib].get("eps", {}).get(f"{method}|{i}")
                if r is None:
                    continue
                err = f" ({r['error']})" if "error" in r else ""
                rows.append(
                    [
                        describe(case),
                        LABELS[lib, method] + err,
                        _cell(r, "value", ".4f"),
                        _cell(r, "first", ".4f"),
                        _cell(r, "min", ".4f"),
                    ]
                )
    table(["setting", "accountant", "ε", "first s", "min s"], rows)
    print()
    rows = []
    for i, s in enumerate(cfg["searches"]):
        target = f"ε={s['epsilon']:g} q={s['q']:g} {s['steps']:,} steps"
        for lib in LIBRARIES:
            for method in METHODS[lib]:
                r = results[lib].get("search", {}).get(f"{method}|{i}")
                if r is None:
                    continue
                err = f" ({r['error']})" if "error" in r else ""
                eps = r.get("epsilon")
                rows.append(
                    [
                        target,
                        LABELS[lib, method] + err,
                        _cell(r, "value", ".5f"),
                        format(eps, ".4f") if isinstance(eps, float) else "n/a",
                        _cell(r, "first", ".3f"),
                        _cell(r, "min", ".3f"),
                        TOLERANCE[lib],
                    ]
                )
    table(["target", "search", "σ", "own ε at σ", "first s", "min s", "tolerance"], rows, (0, 1, 6))
    print("# notes:")
    print(
        "#  ε: each accountant's own reported value (an upper bound for RDP; the "
        "pessimistic PLD for privframe and dp_accounting, grid 1e-4; for Opacus PRV its "
        "upper bound at eps_error 0.01, delta_error δ/1000)"
    )
    print("#  first s: the first run in a fresh process; min s: the fastest of all runs")
    for lib in LIBRARIES:
        r = results[lib]
        if "error" in r:
            print(f"#  {lib}: n/a ({r['error']})")
            continue
        print(f"#  {r['version']}: import {r['import_s']:.2f} s")
        for why in r.get("skipped", {}).values():
            print(f"#  {lib}: skipped {why}")
    pld = results["privframe"].get("eps", {})
    for i, case in enumerate(cfg["cases"]):
        b = pld.get(f"pld|{i}", {}).get("extra", {})
        if "lower" in b:
            print(
                f"#  privframe PLD epsilon_bounds, {describe(case)}: "
                f"[{b['lower']:.4f}, {b['upper']:.4f}]"
            )
    if peers.INSTALL_SECONDS:
        done = ", ".join(f"{k} {v:.0f} s" for k, v in peers.INSTALL_SECONDS.items())
        print(f"#  first-use installs of peer virtualenvs: {done}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer settings and searches")
    parser.add_argument("--repeat", type=int, default=3)
    peers.add_arguments(parser, PEER_NAMES)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per library")
    args = parser.parse_args()
    wanted = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(wanted) - set(PEER_NAMES))
    if unknown:
        parser.error(f"unknown peers {unknown}; known: {', '.join(PEER_NAMES)}")
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    cfg = {
        "delta": DELTA,
        "repeat": args.repeat,
        "cases": QUICK_SETTINGS if args.quick else SETTINGS,
        "searches": QUICK_SEARCHES if args.quick else SEARCHES,
    }
    results: dict[str, dict[str, Any]] = {}
    for name in LIBRARIES:
        if name != "privframe" and name not in wanted:
            results[name] = {"error": "not requested (--peers)"}
            continue
        print(f"# running {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        results[name] = run_library(name, cfg, args)
        print(f"#   done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    report(results, cfg, args)


if __name__ == "__main__":
    main()
