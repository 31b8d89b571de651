"""What serving adds: the benchmark query released through ``privframe serve`` vs in-process.

Runs the benchmark query of ``compare.py`` (per region over 100 public keys:
count, sum and mean of a bounded amount, 1 M rows by default) three ways, on
the same parquet file:

* ``plain polars``: the non-private ``group_by`` (the floor);
* ``local``: a ``pf.Session`` over the file in this process;
* ``remote``: ``pf.connect`` to a ``privframe serve`` child process on
  127.0.0.1 (SQLite ledger), the request sent as the wire JSON, the table
  returned as Arrow IPC.

It prints the median latency of each, the latency the server adds (remote −
local), and the releases per second with 1, 4 and 16 clients at once (each
with its own connection), plus explains per second (no data read). On this
2-core machine the releases are CPU bound, so throughput with more clients
measures how the server shares two cores, not a network limit.

    python benchmarks/bench_server.py --rows 1000000 --repeat 20
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import compare
import httpx
import polars as pl

import privframe as pf
from privframe.api.server.store import Store

DATASET = "workload"


def _start(folder: Path, data: Path, port: int) -> subprocess.Popen[bytes]:
    config = folder / "serve.toml"
    config.write_text(
        f'[server]\nport = {port}\ndatabase = "server.db"\n'
        f"[datasets.{DATASET}]\n"
        f'data = "{data}"\nprivacy_unit = "user_id"\n'
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "privframe", "serve", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    until = time.monotonic() + 60
    while time.monotonic() < until:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health").status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the server did not start")


def _median(run: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _throughput(url: str, token: str, clients: int, per_client: int, explain: bool) -> float:
    keys = compare.br.region_names()
    bound = {"max_groups": compare.MAX_GROUPS, "max_rows_per_group": compare.MAX_ROWS_PER_GROUP}

    def work() -> None:
        sess = pf.connect(url, DATASET, token, results="polars")
        query = compare.privframe_query(sess, bound, keys)
        for _ in range(per_client):
            if explain:
                query.explain(rho=0.001)
            else:
                query.release(rho=0.001)
        sess.close()

    threads = [threading.Thread(target=work) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return clients * per_client / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--port", type=int, default=8799)
    args = parser.parse_args()
    data = compare.write_data(args.rows, 0, Path(tempfile.gettempdir()) / "privframe-bench")
    keys = compare.br.region_names()
    bound = {"max_groups": compare.MAX_GROUPS, "max_rows_per_group": compare.MAX_ROWS_PER_GROUP}
    with tempfile.TemporaryDirectory() as folder:
        process = _start(Path(folder), data, args.port)
        try:
            store = Store(str(Path(folder) / "server.db"))
            token = store.add_analyst("bench")
            store.grant("bench", DATASET, pf.zCDP(10_000.0))
            store.close()
            url = f"http://127.0.0.1:{args.port}"
            local = pf.Session(data, "user_id", pf.zCDP(10_000.0))
            remote = pf.connect(url, DATASET, token, results="polars")
            plain = _median(
                lambda: pl.scan_parquet(data).group_by("region").agg(pl.len()).collect(),
                args.repeat,
            )
            local_s = _median(
                lambda: compare.privframe_query(local, bound, keys).release(rho=0.001),
                args.repeat,
            )
            remote_s = _median(
                lambda: compare.privframe_query(remote, bound, keys).release(rho=0.001),
                args.repeat,
            )
            explain_s = _median(
                lambda: compare.privframe_query(remote, bound, keys).explain(rho=0.001),
                args.repeat,
            )
            remote.close()
            print(f"benchmark query, {args.rows:,} rows, median of {args.repeat}:")
            print(f"  plain polars group_by   {plain * 1000:8.1f} ms  (the floor)")
            print(f"  local release           {local_s * 1000:8.1f} ms  {local_s / plain:5.1f}x")
            print(f"  remote release          {remote_s * 1000:8.1f} ms  {remote_s / plain:5.1f}x")
            print(
                f"  added by the server     {(remote_s - local_s) * 1000:8.1f} ms  "
                f"(remote / local = {remote_s / local_s:.2f})"
            )
            print(f"  remote explain          {explain_s * 1000:8.1f} ms  (no data read)")
            for clients in (1, 4, 16):
                per = max(2, 32 // clients)
                releases = _throughput(url, token, clients, per, explain=False)
                explains = _throughput(url, token, clients, per * 4, explain=True)
                print(
                    f"  {clients:2d} clients: {releases:6.1f} releases/s, "
                    f"{explains:7.1f} explains/s"
                )
        finally:
            process.terminate()
            process.wait(30)


if __name__ == "__main__":
    main()
