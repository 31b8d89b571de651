"""Synthetic data by MST and AIM at equal zCDP ρ: privframe against OpenDP, on a real survey.

Issue 33's benchmark.

Data: ``HealthInsurance`` from the R package AER (Kleiber & Zeileis), shipped
in Debian's ``r-cran-aer``: 8,802 adults aged 18 to 62 from the 1996 Medical
Expenditure Panel Survey (a US household survey), one row per person, 11
columns. Nine are categorical (``health``, ``limit``, ``gender``,
``insurance``, ``married``, ``selfemp``, ``region``, ``ethnicity``,
``education``; their public values are the R factor levels, ``CATEGORIES``)
and two are numeric (``age``, ``family`` size), binned by the fixed public
edges of ``BINS``, chosen from the survey's scope and never from the data.
The binned table has 11 categorical columns and 2⁶·5·6·4·3·7 = 161,280 cells.

Each library synthesizes ``rows = 8,802`` rows (the true count, given to both)
from a zCDP budget ρ (1.0 and 0.1), one row being one person:

* ``privframe``: ``Session(df, None, zCDP(ρ)).synthesize(rho=ρ, method=...,
  domains=..., rows=...)`` on the raw table; the numeric columns get
  ``pf.bin`` domains with ``BINS``' edges and labels, the others their public
  value lists. AIM's workload is every pair of columns (``workload=``, also
  privframe's default).
* ``opendp``: OpenDP's ``Context.compositor(privacy_unit=unit_of(contributions=1),
  privacy_loss=loss_of(rho=ρ))`` and ``.contingency_table(keys=...,
  algorithm=dp.mbi.MST() | dp.mbi.AIM(queries=2)).release().synthesize(rows=...)``, in
  its own virtualenv (``peers.py``'s ``opendp_synth``: ``opendp[mbi]``, which
  brings Private-PGM and jax). OpenDP measures zCDP natively here, so ρ is
  passed as is and no (ε, δ) conversion enters: with keys for every column its
  contingency table refuses a δ. Its defaults stand but one: half of ρ on
  the one-way marginals, the rest on the algorithm (9/10 of it measuring, 1/10
  selecting); AIM's workload is every pair of columns (``AIM(queries=2)``),
  where OpenDP's default is every triple: one such release did not finish in
  15 minutes on this 2-core machine. Each release is drawn from twice, by
  rounding the model's marginals (``synthesize``'s default ``"round"``: the
  row ``opendp``) and by sampling it (``"sample"``: ``opendp (sample)``).
  OpenDP gets the table binned by this script with ``BINS``: its own ``cuts``
  make left-open bins (a, b], ``pf.bin``'s are [a, b).
  Binning by public edges maps rows one by one and spends no budget. OpenDP
  adds a null value to every column's keys; synthetic rows holding it count
  as outside the domain below.

Metrics, against the true binned table, per (library, method, ρ) and rep:

* **2-way / 3-way L1**: for each of the 55 pairs and 165 triples of columns,
  the L1 distance between the normalised marginal of the synthetic table and
  the true one (0 = equal, 2 = disjoint), averaged over the marginals;
* **grouped counts**: for each grouping in ``GROUPINGS``, the mean absolute
  error of the synthetic count over its public cells, in rows;
* **seconds**: wall time from the session or context to the synthetic
  table, in the library's own process (imports and reading the CSV excluded),
  and **load**, the machine's 1-minute load average before it (2 cores:
  above 2, other work slowed the release).

Noise comes from each library's default secure source (OpenDP's cannot be
seeded), so reps differ by fresh noise, and the table shows the mean over
reps (every rep is in the JSON). Under the table, two non-private
yardsticks (``yardsticks``): the true columns shuffled independently, and the
true table resampled with replacement, the sampling noise alone of a perfect
model whose rows are drawn i.i.d. (a table drawn otherwise, e.g. by rounding,
can come closer to the truth than that).

Setup: the CSV comes from Debian's package; ``--prepare`` downloads
``r-cran-aer`` with ``apt-get download``, unpacks it and reads the ``.rda``
file with ``pyreadr`` in a throwaway virtualenv (after ``apt-get update``)::

    python benchmarks/bench_synthetic.py --prepare /tmp/health_insurance.csv

Usage::

    python benchmarks/bench_synthetic.py --csv /tmp/health_insurance.csv     # 3 reps
    python benchmarks/bench_synthetic.py --csv /tmp/health_insurance.csv --quick  # no OpenDP AIM
    python benchmarks/bench_synthetic.py --csv FILE --libraries opendp --save opendp.json
    python benchmarks/bench_synthetic.py --csv FILE --results opendp.json privframe.json

privframe runs in this interpreter (from the repository root, the checkout's
privframe), OpenDP in its virtualenv, made on first use.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import peers  # noqa: E402  (a sibling script, not a package)

CATEGORIES: dict[str, list[str]] = {
    "health": ["no", "yes"],
    "limit": ["no", "yes"],
    "gender": ["female", "male"],
    "insurance": ["no", "yes"],
    "married": ["no", "yes"],
    "selfemp": ["no", "yes"],
    "region": ["northeast", "midwest", "south", "west"],
    "ethnicity": ["other", "afam", "cauc"],
    "education": ["none", "ged", "highschool", "bachelor", "master", "phd", "other"],
}
"""The public values of the categorical columns: AER's factor levels."""

BINS: dict[str, tuple[list[float], list[str]]] = {
    # The survey's scope is adults 18 to 64; ten-year bands after the first.
    "age": ([18, 25, 35, 45, 55, 65], ["18-24", "25-34", "35-44", "45-54", "55-64"]),
    # Household sizes 1 to 4 each, then 5-6 and 7 or more (up to a cap of 20).
    "family": ([1, 2, 3, 4, 5, 7, 20], ["1", "2", "3", "4", "5-6", "7+"]),
}
"""Public edges and labels of the numeric columns, as ``pf.bin``: [e_i, e_i+1), the last closed."""

COLUMNS = [
    "health",
    "age",
    "limit",
    "gender",
    "insurance",
    "married",
    "selfemp",
    "family",
    "region",
    "ethnicity",
    "education",
]
"""The table's columns, in the CSV's order."""

GROUPINGS = [
    ("gender", "insurance"),
    ("education", "insurance"),
    ("ethnicity", "age"),
    ("region", "health"),
]
"""Grouped counts a user would ask for, checked on the synthetic table."""

METHODS = ("mst", "aim")
RHOS = (1.0, 0.1)
LIBRARIES = ("privframe", "opendp")
PEER_VENV = {"opendp": "opendp_synth"}
SLOW = {("opendp", "aim")}
"""What ``--quick`` leaves out: OpenDP's AIM took 12 (ρ = 0.1) to 39 (ρ = 1) minutes a release."""


DOMAINS = {c: BINS[c][1] if c in BINS else CATEGORIES[c] for c in COLUMNS}
"""Every column's public values, in ``COLUMNS``' order (bin labels for numeric ones)."""
SIZES = np.array([len(values) for values in DOMAINS.values()])
"""Each column's number of public values: also the code of a value outside them."""


# -- data ---------------------------------------------------------------------------------

RDA = "usr/lib/R/site-library/AER/data/HealthInsurance.rda"

READ_RDA = """
import json, sys
import pyreadr
frame = pyreadr.read_r(sys.argv[1])["HealthInsurance"]
frame.to_csv(sys.argv[2], index=False)
print(json.dumps({"rows": len(frame), "columns": list(frame.columns)}))
"""


def prepare(out: Path) -> None:
    """Write AER's HealthInsurance table as CSV to ``out``, from Debian's r-cran-aer."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run(["apt-get", "download", "r-cran-aer"], cwd=work, check=True)
        (deb,) = work.glob("r-cran-aer_*.deb")
        subprocess.run(["dpkg-deb", "-x", str(deb), str(work / "x")], check=True)
        # pyreadr reads R's .rda format; it stays out of privframe's environment.
        venv.EnvBuilder(with_pip=True).create(work / "venv")
        python = work / "venv" / "bin" / "python"
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "pyreadr", "pandas"], check=True)
        info = peers.run_python(python, READ_RDA, [str(work / "x" / RDA), str(out)])
    print(f"wrote {out}: {info['rows']} rows, columns {', '.join(info['columns'])}")


def load(csv: Path) -> pd.DataFrame:
    """The raw table: categorical columns as strings, numeric ones as floats.

    Raises ValueError when a value lies outside its public domain, since the
    truth and both libraries must see the same rows.
    """
    raw = pd.read_csv(csv, dtype={c: str for c in CATEGORIES})
    missing = sorted(set(COLUMNS) - set(raw.columns))
    if missing:
        raise ValueError(f"{csv} lacks the columns {missing}; prepare it with --prepare")
    raw = raw[COLUMNS].astype({c: float for c in BINS})
    for col, values in CATEGORIES.items():
        if not raw[col].isin(values).all():
            raise ValueError(f"{col!r} holds values outside {values}")
    for col, (edges, _) in BINS.items():
        if not raw[col].between(edges[0], edges[-1]).all():
            raise ValueError(f"{col!r} holds values outside [{edges[0]}, {edges[-1]}]")
    return raw


def binned(raw: pd.DataFrame) -> pd.DataFrame:
    """The table with each numeric column replaced by its bin label ([e_i, e_i+1), last closed)."""
    out = raw.copy()
    for col, (edges, labels) in BINS.items():
        index = np.searchsorted(edges, raw[col].to_numpy(), side="right") - 1
        out[col] = np.asarray(labels)[np.minimum(index, len(labels) - 1)]
    return out


# -- metrics ------------------------------------------------------------------------------


def encode(frame: pd.DataFrame) -> np.ndarray:
    """Rows × columns: each value's index in its public list, or the list's length if outside."""
    return np.stack(
        [
            frame[c].map({v: i for i, v in enumerate(DOMAINS[c])}).fillna(len(DOMAINS[c]))
            for c in COLUMNS
        ],
        axis=1,
    ).astype(np.int64)


def marginal(coded: np.ndarray, cols: tuple[int, ...]) -> np.ndarray:
    """The counts of the marginal on ``cols``, over the public values plus one "outside" value."""
    shape = tuple(int(SIZES[c]) + 1 for c in cols)
    flat = np.ravel_multi_index(tuple(coded[:, c] for c in cols), shape)
    return np.bincount(flat, minlength=math.prod(shape)).reshape(shape)


def mean_l1(truth: np.ndarray, synthetic: np.ndarray, k: int) -> float:
    """The L1 distance of normalised k-way marginals, averaged over every k columns."""
    distances = [
        np.abs(
            marginal(synthetic, cols) / len(synthetic) - marginal(truth, cols) / len(truth)
        ).sum()
        for cols in itertools.combinations(range(truth.shape[1]), k)
    ]
    return float(np.mean(distances))


def grouped_mae(truth: np.ndarray, synthetic: np.ndarray, group: tuple[str, ...]) -> float:
    """The mean absolute error of the synthetic counts over the grouping's public cells."""
    cols = tuple(COLUMNS.index(c) for c in group)
    public = tuple(slice(0, len(DOMAINS[c])) for c in group)
    return float(np.abs(marginal(synthetic, cols) - marginal(truth, cols))[public].mean())


def score(truth: np.ndarray, synthetic: pd.DataFrame) -> dict[str, float]:
    """The benchmark's metrics of one synthetic table."""
    coded = encode(synthetic)
    out = {"l1_2way": mean_l1(truth, coded, 2), "l1_3way": mean_l1(truth, coded, 3)}
    out |= {"mae_" + "_".join(g): grouped_mae(truth, coded, g) for g in GROUPINGS}
    out["outside_share"] = float((coded == SIZES).any(axis=1).mean())
    return out


def yardsticks(truth_table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """The metrics of two non-private tables made from the truth, to read the others by.

    ``independent``: each column shuffled on its own (exact one-way
    marginals, no dependence), what a synthesizer that learnt nothing more
    would score. ``resampled``: the true table drawn with replacement, what a
    perfect model scores when its rows are drawn independently (sampling
    noise alone).
    """
    rng = np.random.default_rng(0)
    truth = encode(truth_table)
    shuffled = pd.DataFrame({c: rng.permutation(truth_table[c].to_numpy()) for c in COLUMNS})
    resampled = truth_table.iloc[rng.integers(0, len(truth_table), len(truth_table))]
    return {"independent": score(truth, shuffled), "resampled": score(truth, resampled)}


# -- the libraries ------------------------------------------------------------------------

PRIVFRAME_SNIPPET = """
import itertools, json, sys, time
import pandas as pd
import privframe as pf

cfg = json.loads(sys.argv[1])
raw = pd.read_csv(cfg["raw_csv"], dtype={c: str for c in cfg["categories"]})
doms = {c: pf.bin(c, *cfg["bins"][c]) if c in cfg["bins"] else cfg["categories"][c]
        for c in cfg["columns"]}
extra = {}
if cfg["method"] == "aim":
    extra["workload"] = list(itertools.combinations(cfg["columns"], 2))
t0 = time.perf_counter()
sess = pf.Session(raw, None, pf.zCDP(cfg["rho"]))
syn = sess.synthesize(rho=cfg["rho"], method=cfg["method"], domains=doms, rows=cfg["rows"], **extra)
seconds = time.perf_counter() - t0
syn.to_csv(cfg["out"] + ".csv", index=False)
table = {"variant": "privframe", "path": cfg["out"] + ".csv", "seconds": seconds}
print(json.dumps({"version": pf.__version__, "tables": [table]}))
"""

OPENDP_SNIPPET = """
import json, sys, time
import polars as pl
import opendp.prelude as dp

dp.enable_features("contrib")
cfg = json.loads(sys.argv[1])
data = pl.scan_csv(cfg["binned_csv"], infer_schema=False)
keys = {c: cfg["domains"][c] for c in cfg["columns"]}
algorithm = dp.mbi.MST() if cfg["method"] == "mst" else dp.mbi.AIM(queries=2)
t0 = time.perf_counter()
context = dp.Context.compositor(
    data=data,
    privacy_unit=dp.unit_of(contributions=1),
    privacy_loss=dp.loss_of(rho=cfg["rho"]),
    split_evenly_over=1,
)
released = context.query().contingency_table(keys=keys, algorithm=algorithm).release()
release_seconds = time.perf_counter() - t0
tables = []
# Both of the model's ways to draw rows, from the one release: "round" is the default.
for how, variant in (("round", "opendp"), ("sample", "opendp (sample)")):
    t1 = time.perf_counter()
    syn = released.synthesize(rows=cfg["rows"], method=how)
    seconds = release_seconds + time.perf_counter() - t1
    path = f"{cfg['out']}_{how}.csv"
    syn.write_csv(path)
    tables.append({"variant": variant, "path": path, "seconds": seconds})
print(json.dumps({"version": dp.__version__, "tables": tables}))
"""


def run(library: str, cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """One release: the library's version and its synthetic tables, or {"error": reason}."""
    try:
        if library == "privframe":
            return peers.run_python(
                sys.executable, PRIVFRAME_SNIPPET, [json.dumps(cfg)], args.timeout
            )
        name = PEER_VENV[library]
        if args.skip_missing and not peers.is_installed(name):
            return {"error": f"the {name!r} virtualenv is not installed (drop --skip-missing)"}
        return peers.run_snippet(name, OPENDP_SNIPPET, [json.dumps(cfg)], args.timeout)
    except peers.PeerError as exc:
        return {"error": str(exc)}


def measure(
    library: str, cfg: dict[str, Any], truth: np.ndarray, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """One release's records: per synthetic table its variant, seconds and metrics."""
    result = run(library, cfg, args)
    if "error" in result:
        return [{"variant": library, "error": result["error"]}]
    return [
        {
            "variant": t["variant"],
            "version": result["version"],
            "seconds": t["seconds"],
            **score(truth, pd.read_csv(t["path"], dtype=str, keep_default_na=False)),
        }
        for t in result["tables"]
    ]


# -- report -------------------------------------------------------------------------------

METRICS = [
    "l1_2way",
    "l1_3way",
    *("mae_" + "_".join(g) for g in GROUPINGS),
    "outside_share",
    "seconds",
    "load",
]


def summarise(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (method, ρ, variant), the mean of every metric over its reps that ran.

    A configuration none of whose reps ran keeps the first error.
    """
    groups: dict[tuple[str, float, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["method"], r["rho"], r["variant"]), []).append(r)
    rows = []
    for (method, rho, variant), reps in sorted(
        groups.items(), key=lambda kv: (kv[0][0], -kv[0][1])
    ):
        done = [r for r in reps if "error" not in r]
        row: dict[str, Any] = {"variant": variant, "method": method, "rho": rho, "reps": len(done)}
        if done:
            row |= {m: float(np.mean([r[m] for r in done])) for m in METRICS}
        else:
            row["error"] = reps[0]["error"]
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of the mean metrics, one line per (method, ρ, variant)."""
    heads = ["method", "ρ", "library", "reps", "2-way L1", "3-way L1"]
    heads += [f"MAE {' × '.join(g)}" for g in GROUPINGS] + ["seconds", "load"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for row in rows:
        cells = [row["method"].upper(), f"{row['rho']:g}", row["variant"], str(row["reps"])]
        if "error" in row:
            cells += [f"failed: {row['error']}"] + [""] * (len(heads) - len(cells) - 1)
        else:
            cells += [f"{row['l1_2way']:.3f}", f"{row['l1_3way']:.3f}"]
            cells += [f"{row['mae_' + '_'.join(g)]:.1f}" for g in GROUPINGS]
            cells += [f"{row['seconds']:.1f}", f"{row['load']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(records: list[dict[str, Any]], truth_table: pd.DataFrame) -> str:
    """The header lines, the markdown table and the yardsticks of a run's records."""
    versions = {r["variant"]: r["version"] for r in records if "version" in r}
    sticks = yardsticks(truth_table)
    return "\n".join(
        [
            f"# HealthInsurance: {len(truth_table)} rows, {len(COLUMNS)} columns; bins {BINS}",
            f"# versions {versions}; {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
            table(summarise(records)),
            "",
            "Yardsticks, not private (2-way L1, 3-way L1): the true columns shuffled "
            f"independently {sticks['independent']['l1_2way']:.3f}, "
            f"{sticks['independent']['l1_3way']:.3f}; the true table resampled with replacement "
            f"(a perfect model's rows drawn i.i.d.) {sticks['resampled']['l1_2way']:.3f}, "
            f"{sticks['resampled']['l1_3way']:.3f}.",
        ]
    )


def run_all(args: argparse.Namespace, reps: int, truth_table: pd.DataFrame) -> dict[str, Any]:
    """Every (method, ρ, library, rep) release asked for: the saved form of a run."""
    libraries = [x for x in args.libraries.split(",") if x]
    methods = [x for x in args.methods.split(",") if x]
    rhos = [float(x) for x in args.rhos.split(",") if x]
    truth = encode(truth_table)
    run: dict[str, Any] = {"args": vars(args), "records": []}
    with tempfile.TemporaryDirectory() as tmp:
        binned_csv = Path(tmp) / "binned.csv"
        truth_table.to_csv(binned_csv, index=False)
        base = {
            "raw_csv": str(args.csv.resolve()),
            "binned_csv": str(binned_csv),
            "columns": COLUMNS,
            "categories": CATEGORIES,
            "bins": BINS,
            "domains": DOMAINS,
            "rows": len(truth_table),
        }
        for method, rho, library, rep in itertools.product(methods, rhos, libraries, range(reps)):
            if args.quick and (library, method) in SLOW:
                continue
            out = str(Path(tmp) / f"{library}_{method}_{rho:g}_{rep}")
            t0, load_before = time.perf_counter(), os.getloadavg()[0]
            found = measure(
                library, {**base, "method": method, "rho": rho, "out": out}, truth, args
            )
            # Other work on the machine slows the timed releases: the load says how much.
            context = {"method": method, "rho": rho, "rep": rep, "load": load_before}
            run["records"] += [context | r for r in found]
            took = time.perf_counter() - t0
            print(f"# {library} {method} ρ={rho:g} rep {rep}: {took:.1f} s", file=sys.stderr)
            if args.save:  # after every release, so that a cut-short run keeps what it did
                args.save.write_text(json.dumps(run, default=str))
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, help="HealthInsurance as CSV (see --prepare)")
    parser.add_argument("--prepare", type=Path, metavar="OUT", help="write the CSV and stop")
    parser.add_argument(
        "--results", type=Path, nargs="+", help="print one table from runs saved by --save"
    )
    parser.add_argument("--reps", type=int, default=None, help="reps per configuration (3)")
    parser.add_argument(
        "--quick", action="store_true", help="one rep per configuration, without OpenDP's AIM"
    )
    parser.add_argument("--libraries", default=",".join(LIBRARIES), help="comma-separated")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated")
    parser.add_argument("--rhos", default=",".join(f"{r:g}" for r in RHOS), help="comma-separated")
    parser.add_argument("--skip-missing", action="store_true", help="skip uninstalled peers")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per release")
    parser.add_argument("--save", type=Path, help="write every result as JSON here, as they come")
    args = parser.parse_args()
    if args.prepare:
        prepare(args.prepare)
        return
    if args.csv is None:
        parser.error("give --csv FILE (make it with --prepare FILE)")
    truth_table = binned(load(args.csv))
    if args.results:
        runs = [json.loads(path.read_text()) for path in args.results]
        print(report([r for run in runs for r in run["records"]], truth_table))
        return
    reps = args.reps if args.reps is not None else 1 if args.quick else 3
    unknown = sorted(
        (set(args.libraries.split(",")) - {"", *LIBRARIES})
        | (set(args.methods.split(",")) - {"", *METHODS})
    )
    if unknown or reps < 1:
        parser.error(f"unknown libraries or methods {unknown}, or --reps below 1")
    run = run_all(args, reps, truth_table)
    print(report(run["records"], truth_table))


if __name__ == "__main__":
    main()
