"""The client programs of tests/clients/: Kafka's Java client, franz-go and kafkajs, each
fetched on first use into the git-ignored ``.kafka/clients/`` at the repository root, and
run as child processes that print JSON lines.

* Java: ``org.apache.kafka:kafka-clients`` (the version the broker harness pins) and its
  runtime dependencies, fetched with Maven; the programs in ``tests/clients/java/`` are
  compiled with ``javac`` into a folder named by a hash of their sources (so an edit
  recompiles, a rerun does not).
* franz-go: ``tests/clients/franzgo/`` (its go.mod pins franz-go and kadm; go.sum is
  committed), built with ``go build`` into a binary named by a hash of its sources.
* kafkajs: installed with npm into ``tests/server/.kafkajs/`` (git-ignored there; where
  the kafkajs tests lived before they ran against both targets).

``unavailable(reason)``: a missing tool or a failed fetch skips the test with the reason,
except under ``CI=true``, where it fails: CI never passes by skipping a client.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from offsetlog.bench.kafka_broker import KAFKA_VERSION, KafkaUnavailable, find_java, repo_root

ROOT = repo_root()
CLIENTS = ROOT / "tests" / "clients"
CACHE = ROOT / ".kafka" / "clients"
KAFKAJS_PREFIX = ROOT / "tests" / "server" / ".kafkajs"
KAFKAJS_VERSION = "kafkajs@2"
_SLF4J = "1.7.36"  # the slf4j-api kafka-clients 4.x brings; -nop silences it

_lock = threading.Lock()


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def unavailable(reason: str):
    if under_ci():
        pytest.fail(f"client unavailable under CI: {reason}", pytrace=False)
    pytest.skip(f"client unavailable: {reason}")


def _digest(paths) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


# -- Java -------------------------------------------------------------------------------

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>offsetlog</groupId><artifactId>kafka-client-libs</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId>
      <version>{kafka}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-nop</artifactId>
      <version>{slf4j}</version></dependency>
  </dependencies>
</project>
"""


def java_libs(version: str = KAFKA_VERSION) -> Path:
    """``.kafka/clients/java-<version>/libs``: kafka-clients and its runtime dependencies,
    fetched with Maven the first time. :raises KafkaUnavailable: no mvn, or it failed"""
    home = CACHE / f"java-{version}"
    libs, done = home / "libs", home / "complete"
    if done.exists():
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaUnavailable("mvn (Maven) not found: it fetches org.apache.kafka:"
                               f"kafka-clients:{version} from Maven Central")
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pom-", dir=home) as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_POM.format(kafka=version, slf4j=_SLF4J))
        staging = Path(tmp) / "libs"
        r = subprocess.run([mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                            f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
                           capture_output=True, text=True)
        if r.returncode != 0 or not any(staging.glob(f"kafka-clients-{version}.jar")):
            raise KafkaUnavailable(f"Maven could not fetch kafka-clients {version}:\n"
                                   + (r.stdout + r.stderr)[-3000:])
        if libs.exists():
            shutil.rmtree(libs)
        staging.rename(libs)
    done.write_text(version + "\n")
    return libs


class JavaClient:
    """The compiled programs of tests/clients/java/ and how to run them."""

    def __init__(self, java: str, classpath: str) -> None:
        self.java = java
        self.classpath = classpath

    def command(self, program: str, *args) -> list[str]:
        return [self.java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                "-cp", self.classpath, program, *map(str, args)]


def java_client() -> JavaClient:
    """Fetch kafka-clients and compile tests/clients/java/*.java (once per source hash)."""
    with _lock:
        try:
            java = find_java()
        except KafkaUnavailable as e:
            unavailable(str(e))
        javac = str(Path(java).with_name("javac"))
        if not Path(javac).exists():
            javac = shutil.which("javac")
        if not javac:
            unavailable("javac not found (a JDK 17+ compiles the Java client programs)")
        try:
            libs = java_libs()
        except KafkaUnavailable as e:
            unavailable(str(e))
        sources = sorted((CLIENTS / "java").glob("*.java"))
        out = CACHE / "java-classes" / f"{KAFKA_VERSION}-{_digest(sources)}"
        deps = f"{libs}/*"
        if not (out / "complete").exists():
            staging = Path(tempfile.mkdtemp(prefix="classes-", dir=CACHE))
            r = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-d", str(staging),
                                "-cp", deps, *map(str, sources)], capture_output=True, text=True)
            if r.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise AssertionError(f"javac failed:\n{r.stdout}{r.stderr}")
            (staging / "complete").write_text("")
            out.parent.mkdir(parents=True, exist_ok=True)
            if out.exists():
                shutil.rmtree(out)
            staging.rename(out)
        return JavaClient(java, f"{out}{os.pathsep}{deps}")


# -- franz-go ---------------------------------------------------------------------------

def franzgo_binary() -> str:
    """Build tests/clients/franzgo/ with ``go build`` (once per source hash)."""
    with _lock:
        go = shutil.which("go")
        if not go:
            unavailable("go not found (it builds the franz-go client program)")
        src = CLIENTS / "franzgo"
        files = [p for p in src.iterdir() if p.suffix in (".go", ".mod", ".sum")]
        binary = CACHE / "franzgo" / f"franzgo-{_digest(files)}"
        if not binary.exists():
            binary.parent.mkdir(parents=True, exist_ok=True)
            staging = binary.with_suffix(".tmp")
            env = dict(os.environ, GOFLAGS="-mod=mod", CGO_ENABLED="0")
            try:
                r = subprocess.run([go, "build", "-o", str(staging), "."], cwd=src, env=env,
                                   capture_output=True, text=True, timeout=600)
            except subprocess.TimeoutExpired:
                unavailable("go build of the franz-go program timed out (module proxy?)")
            if r.returncode != 0:
                unavailable(f"go build of the franz-go program failed:\n{r.stderr[-3000:]}")
            staging.rename(binary)
        return str(binary)


# -- kafkajs ----------------------------------------------------------------------------

def kafkajs_node() -> str:
    """node, with kafkajs installed (npm) in tests/server/.kafkajs/."""
    with _lock:
        node, npm = shutil.which("node"), shutil.which("npm")
        if node is None or npm is None:
            unavailable("node and npm are needed for the kafkajs client")
        if not (KAFKAJS_PREFIX / "node_modules" / "kafkajs" / "package.json").exists():
            KAFKAJS_PREFIX.mkdir(exist_ok=True)
            try:
                r = subprocess.run([npm, "install", "--prefix", str(KAFKAJS_PREFIX),
                                    "--no-audit", "--no-fund", "--no-save", "--silent",
                                    "--fetch-retries=1", "--fetch-timeout=30000",
                                    KAFKAJS_VERSION], capture_output=True, text=True,
                                   timeout=180)
            except subprocess.TimeoutExpired:
                unavailable(f"npm install {KAFKAJS_VERSION} timed out")
            if r.returncode != 0:
                unavailable(f"npm install {KAFKAJS_VERSION} failed: {r.stderr.strip()[-500:]}")
        return node


def kafkajs_env() -> dict:
    return dict(os.environ, NODE_PATH=str(KAFKAJS_PREFIX / "node_modules"))


# -- running them -----------------------------------------------------------------------

def run_json(cmd: list[str], *, timeout: float = 120, env=None) -> dict:
    """Run a one-shot client program; its last stdout line is a JSON object."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    lines = r.stdout.strip().splitlines()
    assert r.returncode == 0 and lines, (f"{cmd[-6:]} exited {r.returncode}:\n"
                                         f"{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return json.loads(lines[-1])


class MemberProcess:
    """A long-lived group member in a child process: it prints one JSON object a line (its
    events: ``{"event": "assigned", "partitions": [...], ...}``) and takes commands on stdin,
    one a line (``close``: leave the group and exit; ``commit P OFFSET``)."""

    def __init__(self, cmd: list[str], name: str, env=None) -> None:
        self.name = name
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env,
                                     start_new_session=True)
        self.events: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True
                         ).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                self.events.put(json.loads(line))
        self.events.put(None)

    def drain(self) -> None:
        """Move the events that have arrived into ``seen`` (without waiting)."""
        while True:
            try:
                ev = self.events.get_nowait()
            except queue.Empty:
                return
            if ev is None:
                self.events.put(None)  # keep the end for wait_for
                return
            self.seen.append(ev)

    def send(self, command: str) -> None:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def wait_for(self, predicate, timeout: float = 40, what: str = "") -> dict:
        """The next event for which ``predicate(event)`` holds (earlier ones are kept in
        ``seen``)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                ev = self.events.get(timeout=left)
            except queue.Empty:
                break
            if ev is None:
                raise AssertionError(f"{self.name} exited ({self.proc.wait()}) waiting for "
                                     f"{what}; events {self.seen}\n{''.join(self.stderr)[-3000:]}")
            self.seen.append(ev)
            if predicate(ev):
                return ev
        raise AssertionError(f"{self.name}: no {what or 'event'} within {timeout} s; events "
                             f"{self.seen}\n{''.join(self.stderr)[-3000:]}")

    def last(self, event: str) -> dict | None:
        for ev in reversed(self.seen):
            if ev.get("event") == event:
                return ev
        return None

    def close(self, timeout: float = 30) -> int:
        """Ask it to leave and exit."""
        if self.proc.poll() is None:
            try:
                self.send("close")
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: it stops heartbeating, without a LeaveGroup."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
