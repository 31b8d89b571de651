"""The Spark services the cluster tests start: a standalone master, its workers, a Connect server.

Each is a JVM started with pyspark's own launcher (``bin/spark-class`` for the
master and workers, ``bin/spark-submit`` for the Spark Connect server, as
``sbin/start-connect-server.sh`` does), so nothing is downloaded. Everything
binds to the loopback interface on free ports chosen at start, with small
memory (this suite shares 2 cores with other work): 256 MiB for the master and
each worker daemon, 1 GiB of executor memory and 2 cores offered by each
worker, 512 MiB per executor, 768 MiB for the Connect server's driver.

Readiness is polled, never slept for: the master's JSON status page until
every worker has registered, the Connect server's port until it accepts a
connection; each with a timeout, and an error that quotes the service's log.
:meth:`Services.stop` ends every JVM (its whole process group, executors
included), also when a test failed; an ``atexit`` hook does it if the run is
interrupted before the fixtures' teardown, and on Linux the kernel sends each
service SIGTERM if the tests' process is killed outright.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"
START_TIMEOUT = 180.0
"""Seconds a service may take to be ready (JVMs start slowly on a busy 2-core machine)."""
STOP_TIMEOUT = 30.0
_POLL = 0.25  # seconds between readiness checks
_PR_SET_PDEATHSIG = 1  # prctl(2)
_DAEMON_MEMORY = "256m"
_CONNECT_MEMORY = "768m"
WORKER_CORES = 2
WORKER_MEMORY = "1g"

SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
}
"""Spark configuration of every test application, local or on the cluster."""
APP_CONF = {
    **SESSION_CONF,
    "spark.driver.host": LOOPBACK,
    "spark.driver.bindAddress": LOOPBACK,
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    # Two one-core executors per application, so the test driver and the Connect
    # server each get theirs from the two workers' four cores.
    "spark.cores.max": "2",
    "spark.pyspark.python": sys.executable,  # the executors' Python: this one, with numpy
}
"""Spark configuration of every application run on the test cluster (driver on the loopback)."""


class ServiceError(RuntimeError):
    """A Spark service did not start or stop as it should."""


def pyspark_home() -> Path:
    """The pyspark package directory: a Spark distribution with ``bin/`` and ``jars/``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    """A TCP port free on the loopback interface now (the OS's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Service:
    """A JVM the tests started, and the file its output goes to."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        """The end of the service's log, to explain why it failed."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the service's process group (Spark's shutdown hooks run), then SIGKILL."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):  # then SIGKILL below
                self.process.wait(STOP_TIMEOUT)
        # Executors are the worker's children, in its group: end any the worker left.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(STOP_TIMEOUT)


def _ended_with_the_tests() -> Callable[[], None] | None:
    """On Linux, a child's setup that has the kernel send it SIGTERM when the tests' process dies.

    So no JVM outlives a test run that was killed (a CI timeout, SIGKILL) before
    its fixtures' teardown or ``atexit`` could stop it; SIGTERM runs Spark's
    shutdown hooks, which stop the executors. Elsewhere, None (no such call).
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before fork, not in the child
    parent = os.getpid()

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the tests died before the call: end now
            os.kill(os.getpid(), signal.SIGTERM)

    return setup


class Services:
    """The services started so far, stopped together in reverse order."""

    def __init__(self, workdir: Path, environ: Mapping[str, str]) -> None:
        self.workdir = workdir
        self.started: list[Service] = []
        home = pyspark_home()
        conf = workdir / "conf"  # empty: no spark-defaults.conf of the machine's applies
        conf.mkdir(parents=True, exist_ok=True)
        self.env = {
            **environ,
            "SPARK_HOME": str(home),
            "SPARK_CONF_DIR": str(conf),
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_LOG_DIR": str(workdir / "logs"),
            "SPARK_LOCAL_DIRS": str(workdir / "local"),
            "SPARK_DAEMON_MEMORY": _DAEMON_MEMORY,
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_CONNECT_MODE": "0",  # the launcher runs classic Spark, as the sbin scripts do
            "PYSPARK_PYTHON": sys.executable,
        }
        self.bin = home / "bin"
        atexit.register(self.stop)

    def start(self, name: str, *command: str, env: Mapping[str, str] | None = None) -> Service:
        """Start ``command`` (a pyspark launcher) in its own process group, logging to a file.

        ``env`` adds to (or overrides) the services' environment for this one.
        """
        log = self.workdir / (name.replace(" ", "-") + ".log")
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**self.env, **(env or {})},
                cwd=self.workdir,
                start_new_session=True,  # a terminal's Ctrl-C reaches pytest, which stops it
                preexec_fn=_ended_with_the_tests(),
            )
        service = Service(name, process, log)
        self.started.append(service)
        return service

    def stop(self) -> None:
        """Stop every service, the last started first; raise if one would not end."""
        stuck = []
        while self.started:
            service = self.started.pop()
            try:
                service.stop()
            except subprocess.TimeoutExpired:
                stuck.append(f"{service.name} (pid {service.process.pid})")
        if stuck:
            raise ServiceError(f"Spark services did not stop: {', '.join(stuck)}")


def wait_until(ready: Callable[[], bool], what: str, watched: list[Service]) -> None:
    """Poll ``ready()`` until it holds; fail early if a watched service exits, or at the timeout."""
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        for service in watched:
            code = service.process.poll()
            if code is not None:
                raise ServiceError(
                    f"{service.name} exited with code {code} while waiting for {what}; "
                    f"its log {service.log} ends:\n{service.tail()}"
                )
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {s.name} ({s.log}):\n{s.tail(10)}" for s in watched)
            raise ServiceError(f"no {what} after {START_TIMEOUT:.0f} s; the logs end:\n{logs}")
        time.sleep(_POLL)


@dataclass(frozen=True)
class Cluster:
    """A running standalone cluster and the Spark Connect server on it."""

    master: str
    """The master's URL, ``spark://127.0.0.1:<port>``."""
    status: str
    """The master's status page, ``http://127.0.0.1:<port>`` (JSON under ``/json/``)."""
    connect: str
    """The Connect server's URL, ``sc://127.0.0.1:<port>``."""
    conf: dict[str, str]
    """The Spark configuration of an application on this cluster (:data:`APP_CONF` and
    the executors' Python path)."""


# Executors need numpy and pyarrow, not privframe (docs/spark.md): their Python workers
# start with this on their path, so any import of privframe there fails the job.
_WITHOUT_PRIVFRAME = """\
import sys


class NoPrivframe:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "privframe":
            raise ImportError("privframe is not installed on the test cluster's executors")
        return None


sys.meta_path.insert(0, NoPrivframe())
"""


def executor_conf(workdir: Path) -> dict[str, str]:
    """:data:`APP_CONF`, with executors whose Python cannot import privframe."""
    path = workdir / "executor-python"
    path.mkdir(exist_ok=True)
    (path / "sitecustomize.py").write_text(_WITHOUT_PRIVFRAME)
    return {**APP_CONF, "spark.executorEnv.PYTHONPATH": str(path)}


def alive_workers(status: str) -> int:
    """How many workers the master's JSON status page lists as alive (-1 while it is down)."""
    try:
        with urllib.request.urlopen(f"{status}/json/", timeout=5) as page:
            state = json.load(page)
    except (OSError, ValueError):
        return -1
    return int(state.get("aliveworkers", 0))


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        return probe.connect_ex((LOOPBACK, port)) == 0


def start_cluster(services: Services, workers: int = 2) -> Cluster:
    """A master, ``workers`` workers and a Connect server on the loopback, all started at once.

    Ready when every worker has registered with the master and the Connect
    server's gRPC port accepts connections (it opens the port last).
    """
    spark_class = str(services.bin / "spark-class")
    port, web, grpc = free_port(), free_port(), free_port()
    url, status = f"spark://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{web}"
    started = [
        services.start(
            "master",
            spark_class,
            "org.apache.spark.deploy.master.Master",
            *("--host", LOOPBACK, "--port", str(port), "--webui-port", str(web)),
        )
    ]
    for i in range(workers):
        started.append(
            services.start(
                f"worker {i}",
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                *("--host", LOOPBACK, "--port", str(free_port())),
                *("--webui-port", str(free_port())),
                *("--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY),
                *("--work-dir", str(services.workdir / f"worker-{i}")),
                url,
            )
        )
    conf = executor_conf(services.workdir)
    server_conf = {
        **conf,
        "spark.connect.grpc.binding.address": LOOPBACK,
        "spark.connect.grpc.binding.port": str(grpc),
    }
    started.append(
        services.start(
            "connect server",
            str(services.bin / "spark-submit"),
            *("--class", "org.apache.spark.sql.connect.service.SparkConnectServer"),
            *("--name", "privframe-tests-connect", "--master", url),
            *(arg for key, value in server_conf.items() for arg in ("--conf", f"{key}={value}")),
            # The launcher sizes this server as a daemon; a driver needs at least 450 MiB.
            env={"SPARK_DAEMON_MEMORY": _CONNECT_MEMORY},
        )
    )
    wait_until(
        lambda: alive_workers(status) == workers,
        f"{workers} workers registered with the master at {url} (status {status}/json/)",
        started,
    )
    wait_until(lambda: _accepts(grpc), f"Spark Connect server on port {grpc}", started)
    return Cluster(url, status, f"sc://{LOOPBACK}:{grpc}", conf)
