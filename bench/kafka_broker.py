"""A real Apache Kafka broker on loopback, for the differential tests and the bench.

Apache Kafka is the oracle the wire server is compared with (issue 26). This module fetches
one pinned Kafka release's jars from Maven Central with ``mvn`` (on first use only, into
``.kafka/<version>/libs`` at the repository root, which git ignores), formats a single-node
KRaft log directory (broker and controller in one process) in a temporary folder, starts
``kafka.Kafka`` on free loopback ports, waits until it answers Metadata, and stops it with
SIGTERM (SIGKILL after a timeout).

    with KafkaBroker(extra={"flush.messages": "1"}) as broker:
        print(broker.bootstrap)          # "127.0.0.1:PORT"

``KafkaBroker(authorizer=True)`` runs Kafka's StandardAuthorizer: clients of ``bootstrap``
(PLAINTEXT) are ``User:ANONYMOUS``, and the super user ``User:admin`` (``ADMIN``) speaks
SASL_PLAINTEXT PLAIN on a second listener (``admin_socket()``), which the broker and its
controller use between themselves too. With ``secure={"users": {...}}`` as well, those users
authenticate with SCRAM on a SASL_PLAINTEXT listener as named principals.

It needs Java 17+ (``java`` on PATH, or ``$JAVA_HOME/bin/java``) and Maven (``mvn``);
:class:`KafkaUnavailable` names what is missing.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

#: the Apache Kafka release every test and bench compares with (org.apache.kafka:kafka_2.13)
KAFKA_VERSION = "4.4.0"
#: slf4j binding so the broker's log reaches its log file (Kafka's jars bring slf4j-api 1.7)
_SLF4J_VERSION = "1.7.36"

#: settings every broker starts with: one node, no initial rebalance delay, short sessions,
#: and consumer-group target assignments computed in the heartbeat that calls for them, as
#: offsetlog computes them (Kafka 4.4 batches them off the request path by default, KIP-1263;
#: with these three its epochs and assignments are ours to compare exactly)
BASE_PROPERTIES = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "50",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "50",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.min.assignment.interval.ms": "0",
    "group.consumer.assignor.offload.enable": "false",
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
}

#: the super user of a broker with an authorizer: (name, password), SASL PLAIN
ADMIN = ("admin", "admin-secret")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>offsetlog</groupId><artifactId>kafka-broker-libs</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId>
      <version>{slf4j}</version></dependency>
  </dependencies>
</project>
"""


class KafkaUnavailable(RuntimeError):
    """Java 17+ or Maven is missing, or the jars could not be fetched."""


def repo_root() -> Path:
    """The checkout this module runs from (bench/ is installed as offsetlog.bench, a link)."""
    here = Path(__file__).resolve().parent
    for p in (here, *here.parents):
        if (p / "pyproject.toml").is_file():
            return p
    return Path.cwd()


def cache_dir(version: str = KAFKA_VERSION) -> Path:
    """Where the jars of ``version`` are kept (``$OFFSETLOG_KAFKA_CACHE`` overrides the root)."""
    root = os.environ.get("OFFSETLOG_KAFKA_CACHE")
    return (Path(root) if root else repo_root() / ".kafka") / version


def find_java() -> str:
    """The ``java`` of Java 17 or later. :raises KafkaUnavailable: none is found"""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() \
        else shutil.which("java")
    if not java:
        raise KafkaUnavailable("java not found (Apache Kafka needs Java 17+ on PATH or JAVA_HOME)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(m.group(1)) if m else 0
    if major == 1 and m and m.group(2):
        major = int(m.group(2))  # "1.8.0" style
    if major < 17:
        raise KafkaUnavailable(f"Java 17+ needed for Apache Kafka {KAFKA_VERSION}, "
                               f"{java} is {out.splitlines()[0] if out else 'unknown'}")
    return java


def fetch_libs(version: str = KAFKA_VERSION) -> Path:
    """The folder of Kafka ``version``'s jars and runtime dependencies, fetched with Maven
    the first time. :raises KafkaUnavailable: no ``mvn``, or Maven failed"""
    libs = cache_dir(version) / "libs"
    done = cache_dir(version) / "complete"
    if done.exists():
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaUnavailable(f"mvn (Maven) not found: it fetches Apache Kafka {version}'s "
                               "jars from Maven Central")
    cache_dir(version).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-pom-", dir=cache_dir(version)) as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_POM.format(kafka=version, slf4j=_SLF4J_VERSION))
        staging = Path(tmp) / "libs"
        r = subprocess.run([mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                            f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
                           capture_output=True, text=True)
        if r.returncode != 0 or not any(staging.glob(f"kafka_2.13-{version}.jar")):
            raise KafkaUnavailable(f"Maven could not fetch org.apache.kafka:kafka_2.13:{version}:\n"
                                   + (r.stdout + r.stderr)[-3000:])
        if done.exists():  # another process fetched them meanwhile
            return libs
        if libs.exists():
            shutil.rmtree(libs)
        staging.rename(libs)  # complete or absent: a failed fetch leaves nothing half-done
    done.write_text(version + "\n")
    return libs


def check_available() -> None:
    """:raises KafkaUnavailable: Java 17+ or Maven (when the jars are not cached) is missing"""
    find_java()
    if not (cache_dir() / "complete").exists() and not shutil.which("mvn"):
        raise KafkaUnavailable("mvn (Maven) not found: it fetches Apache Kafka "
                               f"{KAFKA_VERSION}'s jars from Maven Central")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KafkaBroker:
    """One Apache Kafka process: a KRaft broker and controller on 127.0.0.1.

    ``extra``: broker properties on top of :data:`BASE_PROPERTIES` (e.g.
    ``{"flush.messages": "1"}``). ``heap``: the JVM's ``-Xmx``.

    ``secure``: ``{"users": {name: password}}`` adds a SASL_PLAINTEXT listener
    (``ports["SASL_PLAINTEXT"]``), and with ``"keystore"`` (a PKCS12 path),
    ``"keystore_password"`` and ``"truststore"`` (a PEM path of the CAs of client
    certificates) an SSL and a SASL_SSL one too (``ports["SSL"]``, ``ports["SASL_SSL"]``); the
    users get SCRAM-SHA-256 and -512 credentials when the storage is formatted
    (``--add-scram``), and both SCRAM mechanisms and PLAIN are enabled on the SASL listeners.

    ``authorizer``: the StandardAuthorizer, with the super user ``User:admin`` (``ADMIN``,
    PLAIN on the INTERNAL listener, which the broker and its controller use too) and
    ``super_users`` (names, made ``User:NAME``) besides. It composes with ``secure``: SASL
    users are then named principals the ACLs judge.
    """

    def __init__(self, *, extra: dict | None = None, heap: str = "512m",
                 start_timeout: float = 120.0, secure: dict | None = None,
                 authorizer: bool = False, super_users: tuple[str, ...] = ()) -> None:
        self.secure = secure
        self.super_users = list(super_users)
        self.ports: dict[str, int] = {}
        self.authorizer = authorizer
        self.internal_port = 0
        self.properties = {**BASE_PROPERTIES, **{k: str(v) for k, v in (extra or {}).items()}}
        self.heap = heap
        self.start_timeout = start_timeout
        self.port = 0
        self.controller_port = 0
        self.proc: subprocess.Popen | None = None
        self.directory: Path | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._log = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        assert self.directory is not None
        return self.directory / "broker.log"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _server_properties(self, data: Path) -> str:
        # one map: listener name -> (port, security protocol); the optional listeners are
        # added by ``secure`` (SASL_PLAINTEXT, and SSL and SASL_SSL with a keystore) and
        # ``authorizer`` (INTERNAL, the super user's), which compose
        listeners = {"PLAINTEXT": (self.port, "PLAINTEXT")}
        for name, port in self.ports.items():
            listeners[name] = (port, name)
        if self.authorizer:
            listeners["INTERNAL"] = (self.internal_port, "SASL_PLAINTEXT")
        advertised = ",".join(f"{n}://127.0.0.1:{p}" for n, (p, _) in listeners.items())
        listeners["CONTROLLER"] = (self.controller_port,
                                   "SASL_PLAINTEXT" if self.authorizer else "PLAINTEXT")
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, (p, _) in listeners.items()),
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL" if self.authorizer else "PLAINTEXT",
            "listener.security.protocol.map": ",".join(f"{n}:{proto}" for n, (_, proto)
                                                       in listeners.items()),
            "log.dirs": str(data),
            **self.properties,
        }
        mechanisms: list[str] = []
        if self.secure:
            sec = self.secure
            scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                     + " ".join(f'user_{u}="{pw}"' for u, pw in sec["users"].items()) + ";")
            mechanisms += ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
            for name in ("SASL_PLAINTEXT", "SASL_SSL"):
                if name in self.ports:
                    low = name.lower()
                    props.update({
                        f"listener.name.{low}.sasl.enabled.mechanisms":
                            "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
                        f"listener.name.{low}.scram-sha-256.sasl.jaas.config": scram,
                        f"listener.name.{low}.scram-sha-512.sasl.jaas.config": scram,
                        f"listener.name.{low}.plain.sasl.jaas.config": plain,
                    })
            if sec.get("keystore"):
                props.update({
                    "ssl.keystore.type": "PKCS12", "ssl.keystore.location": sec["keystore"],
                    "ssl.keystore.password": sec["keystore_password"],
                    "ssl.truststore.type": "PEM", "ssl.truststore.location": sec["truststore"],
                    "ssl.client.auth": "requested",
                })
        if self.authorizer:
            user, password = ADMIN
            jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="{user}" password="{password}" user_{user}="{password}";')
            mechanisms += [] if "PLAIN" in mechanisms else ["PLAIN"]
            props.update({
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "sasl.mechanism.controller.protocol": "PLAIN",
                "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.internal.plain.sasl.jaas.config": jaas,
                "listener.name.controller.plain.sasl.jaas.config": jaas,
                "authorizer.class.name": STANDARD_AUTHORIZER,
                "super.users": ";".join([f"User:{user}", *(f"User:{u}" for u in
                                                          self.super_users)]),
            })
        if mechanisms:
            props["sasl.enabled.mechanisms"] = ",".join(mechanisms)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def start(self) -> "KafkaBroker":
        java = find_java()
        libs = fetch_libs()
        self._tmp = tempfile.TemporaryDirectory(prefix="kafka-broker-")
        self.directory = Path(self._tmp.name)
        # distinct free ports: the client and controller listeners, SSL and SASL_SSL for a
        # secure broker, INTERNAL (the super user's) for one with the authorizer
        ports: set[int] = set()
        secured = ([] if not self.secure else ["SASL_PLAINTEXT"]
                   + (["SSL", "SASL_SSL"] if self.secure.get("keystore") else []))
        while len(ports) < 2 + len(secured) + (1 if self.authorizer else 0):
            ports.add(free_port())
        free = sorted(ports)
        self.port, self.controller_port = free.pop(0), free.pop(0)
        for name in secured:
            self.ports[name] = free.pop(0)
        if self.authorizer:
            self.internal_port = free.pop(0)
        config = self.directory / "server.properties"
        config.write_text(self._server_properties(self.directory / "data"))
        classpath = f"{libs}/*"
        jvm = [java, f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.awt.headless=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
               "-Dlog4j2.level=warn", "-cp", classpath]
        scram = []
        for user, password in (self.secure or {}).get("users", {}).items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                scram += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        fmt = subprocess.run(jvm + ["kafka.tools.StorageTool", "format", "--ignore-formatted",
                                    "-t", _cluster_id(), "-c", str(config), *scram],
                             capture_output=True, text=True)
        if fmt.returncode != 0:
            raise RuntimeError(f"Kafka's StorageTool could not format {self.directory}:\n"
                               + (fmt.stdout + fmt.stderr)[-3000:])
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(jvm + ["kafka.Kafka", str(config)], stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=_die_with_parent)
        atexit.register(self.stop)  # an interrupted test run leaves no broker behind
        try:
            self._wait_ready()
        except BaseException:
            tail = self.log_tail()
            self.stop()
            raise RuntimeError(f"Apache Kafka {KAFKA_VERSION} did not start on {self.bootstrap}; "
                               f"the end of its log:\n{tail}") from None
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"exited with {self.proc.returncode}")
            if (_answers(self.internal_port, ADMIN) if self.authorizer
                    else _answers(self.port)):
                return
            time.sleep(0.2)
        raise TimeoutError(f"not serving after {self.start_timeout} s")

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def admin_socket(self) -> socket.socket:
        """A connection of the super user (``authorizer=True``), authenticated."""
        sock = socket.create_connection(("127.0.0.1", self.internal_port), timeout=10)
        _sasl_plain(sock, *ADMIN)
        return sock

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when this process dies, however it dies (Linux's
    PR_SET_PDEATHSIG; elsewhere nothing)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except Exception:
        pass


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding (22 chars),
    never starting with "-" (as Kafka's ``Uuid.randomUuid``): StorageTool's ``-t -abc...``
    reads such an id as an option and refuses to format, one start in 64."""
    import base64

    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _request(sock: socket.socket, api_key: int, version: int, body: dict):
    """Send one request (encoded by kio, from Kafka's own schemas) and read its answer."""
    import io
    import struct

    from kio.index import load_request_schema, load_response_schema
    from kio.serial import entity_reader, entity_writer

    from offsetlog.bench.wire_floors import exactly

    schema = load_request_schema(api_key, version)
    header = schema.__header_schema__
    buf = io.BytesIO()
    entity_writer(header)(buf, header(request_api_key=api_key, request_api_version=version,
                                      correlation_id=1, client_id="offsetlog-probe"))
    entity_writer(schema)(buf, schema(**body))
    sock.sendall(struct.pack(">i", buf.tell()) + buf.getvalue())
    size = struct.unpack(">i", exactly(sock, 4))[0]
    data = exactly(sock, size)
    answer = load_response_schema(api_key, version)
    _, at = entity_reader(answer.__header_schema__)(data, 0)
    return entity_reader(answer)(data, at)[0]


def _sasl_plain(sock: socket.socket, user: str, password: str) -> None:
    """SaslHandshake and SaslAuthenticate with PLAIN: the connection is now ``user``'s."""
    shake = _request(sock, 17, 1, dict(mechanism="PLAIN"))
    if shake.error_code.value != 0:
        raise ConnectionError(f"SaslHandshake: {shake.error_code}")
    auth = _request(sock, 36, 2, dict(auth_bytes=f"\0{user}\0{password}".encode()))
    if auth.error_code.value != 0:
        raise ConnectionError(f"SaslAuthenticate: {auth.error_code} {auth.error_message}")


def _answers(port: int, sasl: tuple[str, str] | None = None) -> bool:
    """The broker serves: Metadata names it, and it is the coordinator of a group and of a
    transactional id (asking creates ``__consumer_offsets`` and ``__transaction_state``);
    ``sasl``: asked as that (PLAIN) user."""
    from kio.static.primitive import i8

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            if sasl is not None:
                _sasl_plain(sock, *sasl)
            meta = _request(sock, 3, 12, dict(topics=None, allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False))
            if not meta.brokers:
                return False
            for key_type in (0, 1):
                fc = _request(sock, 10, 4, dict(key_type=i8(key_type),
                                                coordinator_keys=("offsetlog-probe",)))
                if any(c.error_code.value != 0 for c in fc.coordinators):
                    return False
            return True
    except OSError:
        return False


def main(argv=None) -> int:
    """``python -m offsetlog.bench.kafka_broker [KEY=VALUE]...``: run a broker until Ctrl-C."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    extra = dict(a.split("=", 1) for a in args)
    with KafkaBroker(extra=extra) as broker:
        print(f"Apache Kafka {KAFKA_VERSION} listening on {broker.bootstrap}", flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
