"""A real, single-node Apache Kafka broker for development and tests.

Why not a container or a tarball: the machines this project runs on reach
Maven Central but no download site and have no Docker, and the broker is
just jars. So the install resolves ``org.apache.kafka:kafka_2.13`` and its
runtime dependencies with Maven into a cache directory, adds the logging
binding Kafka's POM leaves out (log4j2 core + the SLF4J bridge matching the
resolved ``slf4j-api``), and runs ``kafka.Kafka`` with ``java -cp``.

The broker is one KRaft process (broker + controller) bound to 127.0.0.1
only, on free ports, with a small heap and settings tuned for tests: no
initial rebalance delay, replication 1 everywhere, few offsets partitions
(a group's first join creates them all), and a message size limit above the
contract's 1 MiB so that oversized messages reach the worker and get
dead-lettered instead of being refused at the producer.

Layout under the cache directory (``$FLEETEPI_CACHE`` or
``~/.cache/fleetepi``)::

    kafka/<version>/libs/*.jar      the broker's classpath
    kafka/<version>/.installed      written last: the install is complete
    kafka/m2/                       Maven's local repository

and under a broker's data directory::

    server.properties  log4j2.properties  logs/  server.log  broker.json (pid, ports)
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from fleetepi.procs import pid_alive
from fleetepi.stream.exceptions import BrokerError

#: Kafka release installed by default (a 4.x: KRaft only, runs on Java 17).
KAFKA_VERSION = "4.1.0"
SCALA_VERSION = "2.13"
#: Broker heap: enough for tests and benchmarks, small enough for a shared 2-core box.
HEAP = "-Xmx512m"
#: Default broker data directory name under the cache.
DEFAULT_DATA = "kafka-data"


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """``cache_dir``, else ``$FLEETEPI_CACHE``, else ``~/.cache/fleetepi``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("FLEETEPI_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fleetepi"


# --------------------------------------------------------------------------- install
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>fleetepi.dev</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_{scala}</artifactId><version>{version}</version></dependency>
{extra}  </dependencies>
</project>
"""
_DEP = "    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>\n"


def _jar_version(libs: Path, artifact: str) -> str | None:
    """Version of ``artifact-<version>.jar`` in ``libs`` (None if absent)."""
    for jar in libs.glob(f"{artifact}-*.jar"):
        rest = jar.name[len(artifact) + 1 : -4]
        if rest[:1].isdigit():
            return rest
    return None


def _mvn(pom_dir: Path, repo: Path, libs: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError("Maven (mvn) is not installed; run scripts/install.d/kafka.sh")
    cmd = [mvn, "-q", "-B", "-f", str(pom_dir / "pom.xml"), "dependency:copy-dependencies",
           "-DincludeScope=runtime", f"-DoutputDirectory={libs}", f"-Dmaven.repo.local={repo}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BrokerError(f"mvn failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}")


def install(cache_dir: str | Path | None = None, version: str = KAFKA_VERSION) -> Path:
    """Install the broker jars (idempotent; ~0 s when cached). Returns the ``libs`` directory.

    Two Maven passes: the first resolves Kafka and tells which ``slf4j-api``
    and log4j versions it brings; the second adds log4j-core and the SLF4J
    bridge of that generation (``log4j-slf4j-impl`` for SLF4J 1.x,
    ``log4j-slf4j2-impl`` for 2.x), without which the broker logs nothing.
    """
    home = cache_root(cache_dir) / "kafka" / version
    libs = home / "libs"
    marker = home / ".installed"
    if marker.exists():
        return libs
    repo = cache_root(cache_dir) / "kafka" / "m2"
    work = home / "pom"
    work.mkdir(parents=True, exist_ok=True)
    if libs.exists():
        shutil.rmtree(libs)
    (work / "pom.xml").write_text(_POM.format(scala=SCALA_VERSION, version=version, extra=""))
    _mvn(work, repo, libs)
    slf4j = _jar_version(libs, "slf4j-api")
    log4j = _jar_version(libs, "log4j-api") or "2.24.3"
    bridge = "log4j-slf4j2-impl" if slf4j and not slf4j.startswith("1.") else "log4j-slf4j-impl"
    extra = _DEP.format(g="org.apache.logging.log4j", a="log4j-core", v=log4j)
    extra += _DEP.format(g="org.apache.logging.log4j", a=bridge, v=log4j)
    (work / "pom.xml").write_text(_POM.format(scala=SCALA_VERSION, version=version, extra=extra))
    _mvn(work, repo, libs)
    if _jar_version(libs, f"kafka_{SCALA_VERSION}") != version:
        raise BrokerError(f"kafka_{SCALA_VERSION}-{version}.jar missing from {libs} after mvn")
    marker.write_text(json.dumps({"version": version, "slf4j": slf4j, "bridge": bridge, "log4j": log4j}))
    return libs


# --------------------------------------------------------------------------- run
@dataclass
class BrokerInfo:
    """What ``broker.json`` records about a started broker."""

    pid: int
    port: int
    controller_port: int
    data_dir: str
    version: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def port_is_free(port: int) -> bool:
    """Whether ``port`` can be bound on 127.0.0.1 right now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _properties(data: Path, port: int, cport: int) -> str:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{cport}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data / "logs"),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "message.max.bytes": str(8 << 20),
        "replica.fetch.max.bytes": str(8 << 20),
        "log.cleaner.backoff.ms": "1000",
        "auto.create.topics.enable": "true",
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


_LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = FILE
"""


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise BrokerError("java is not installed (Java 17 is needed); run scripts/install.d/kafka.sh")
    return java


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's own form)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _info_path(data: Path) -> Path:
    return data / "broker.json"


def read_info(data_dir: str | Path) -> BrokerInfo | None:
    """The recorded broker of ``data_dir``, if any (alive or not)."""
    p = _info_path(Path(data_dir))
    try:
        return BrokerInfo(**json.loads(p.read_text()))
    except (OSError, ValueError, TypeError):
        return None



def answers(bootstrap: str, timeout_s: float = 2.0) -> bool:
    """True if the broker at ``bootstrap`` returns cluster metadata."""
    import logging

    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    host, _, port = bootstrap.split(",")[0].rpartition(":")
    try:  # cheap first: kafka-python retries a closed port with backoff for ~30 s
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError):
        return False
    quiet = logging.getLogger("kafka")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout_s * 1000),
                                 client_id="fleetepi-dev-probe")
    except (KafkaError, OSError, ValueError):
        quiet.setLevel(level)
        return False
    try:
        admin.describe_cluster()
        return True
    except (KafkaError, OSError, ValueError):
        return False
    finally:
        admin.close()
        quiet.setLevel(level)


def format_storage(jvm: list[str], props: Path, cluster_id: str) -> None:
    """Format KRaft storage once (``StorageTool format``).

    The id goes in ``--cluster-id=ID`` form: one id in 64 starts with "-",
    which the tool's argument parser takes for an option when it is passed
    as a separate word (seen as a failed benchmark start).

    :raises BrokerError: the tool failed (its output is in the message).
    """
    fmt = subprocess.run([*jvm, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                          "--config", str(props), "--ignore-formatted"], capture_output=True, text=True)
    if fmt.returncode != 0:
        raise BrokerError(f"StorageTool format failed: {(fmt.stdout + fmt.stderr)[-2000:]}")


def start(data_dir: str | Path | None = None, port: int | None = None, cache_dir: str | Path | None = None,
          version: str = KAFKA_VERSION, timeout_s: float = 90.0, fresh: bool = False,
          preferred_port: int | None = None) -> BrokerInfo:
    """Install if needed, format (first time), start, and wait until the broker answers.

    :param data_dir: broker state (default ``<cache>/kafka-data``); formatted once.
    :param port: client port on 127.0.0.1 (a free one by default).
    :param fresh: wipe ``data_dir`` first (tests want an empty broker).
    :param preferred_port: without ``port``, this one when it is free (the CLI's 9092), else a free one.
    :raises BrokerError: install, format or start failed, or no answer within ``timeout_s``.
    """
    libs = install(cache_dir, version)
    data = Path(data_dir) if data_dir is not None else cache_root(cache_dir) / DEFAULT_DATA
    running = read_info(data)
    if running is not None and pid_alive(running.pid):
        if fresh:
            stop(data)
        else:
            return running
    if fresh and data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True, exist_ok=True)
    if port is None and preferred_port is not None and port_is_free(preferred_port):
        port = preferred_port
    port = port or free_port()
    cport = free_port()
    while cport == port:
        cport = free_port()
    props = data / "server.properties"
    props.write_text(_properties(data, port, cport))
    log_cfg = data / "log4j2.properties"
    log_cfg.write_text(_LOG4J2.format(log=data / "server.log", level=os.environ.get("FLEETEPI_KAFKA_LOG", "WARN")))
    java = _java()
    cp = f"{libs}/*"
    jvm = [java, HEAP, "-Xms128m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
           f"-Dlog4j2.configurationFile={log_cfg}", "-cp", cp]
    if not (data / "logs" / "meta.properties").exists():
        format_storage(jvm, props, _cluster_id())
    out = open(data / "stdout.log", "ab")
    proc = subprocess.Popen([*jvm, "kafka.Kafka", str(props)], stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    out.close()
    info = BrokerInfo(pid=proc.pid, port=port, controller_port=cport, data_dir=str(data), version=version)
    _info_path(data).write_text(json.dumps(asdict(info)))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (data / "stdout.log").read_text(errors="replace")[-2000:]
            raise BrokerError(f"broker exited with {proc.returncode} at start: {tail}")
        if answers(info.bootstrap):
            return info
        time.sleep(0.3)
    stop(data)
    raise BrokerError(f"broker on {info.bootstrap} did not answer within {timeout_s:.0f} s (see {data}/server.log)")


def stop(data_dir: str | Path | None = None, cache_dir: str | Path | None = None, timeout_s: float = 30.0) -> bool:
    """SIGTERM the broker of ``data_dir`` and wait for it (SIGKILL after ``timeout_s``).

    Returns False if no broker was running.
    """
    data = Path(data_dir) if data_dir is not None else cache_root(cache_dir) / DEFAULT_DATA
    info = read_info(data)
    if info is None or not pid_alive(info.pid):
        return False
    try:
        os.kill(info.pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(info.pid):
            return True
        time.sleep(0.1)
    try:
        os.kill(info.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def status(data_dir: str | Path | None = None, cache_dir: str | Path | None = None) -> dict[str, object]:
    """Recorded pid/ports plus whether the process lives and the broker answers."""
    data = Path(data_dir) if data_dir is not None else cache_root(cache_dir) / DEFAULT_DATA
    info = read_info(data)
    if info is None:
        return {"running": False, "data_dir": str(data)}
    alive = pid_alive(info.pid)
    return {**asdict(info), "bootstrap": info.bootstrap, "running": alive,
            "answers": alive and answers(info.bootstrap)}


__all__ = ["KAFKA_VERSION", "BrokerInfo", "answers", "cache_root", "free_port", "install", "read_info", "start",
           "status", "stop"]
