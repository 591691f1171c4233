"""``kafka-configs`` itself (org.apache.kafka.tools.ConfigCommand from the cached jars)
manages SCRAM users of ``offsetlog serve`` as it does a Kafka broker's: ``--alter
--add-config 'SCRAM-SHA-512=[password=...]'``, ``--describe`` and ``--delete-config``, run
against both, the tool's output compared; between the steps a client authenticates as the
new user on both, and fails to once the credential is deleted."""

from __future__ import annotations

import socket
import subprocess
import time
import uuid

import pytest

from offsetlog.bench.kafka_broker import ADMIN, STANDARD_AUTHORIZER
from offsetlog.server.scram import make_credential
from offsetlog.store import OffsetStore
from support.kafka_broker import kafka_tools
from support.sasl_raw import SaslFailed, scram_login
from support.wire_server import Server

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture(scope="module")
def targets(kafka_acl_broker, tmp_path_factory):
    """(name, bootstrap, SASL_PLAINTEXT port, admin.properties) of Kafka and of offsetlog."""
    tmp = tmp_path_factory.mktemp("kafka-configs")
    directory = str(tmp / "store")
    with OffsetStore.open(directory) as store:
        store.registries.set_scram_credential(
            ADMIN[0], "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", ADMIN[1]))
    server = Server(directory, config=[
        "listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=SCRAM-SHA-512",
        f"authorizer.class.name={STANDARD_AUTHORIZER}", f"super.users=User:{ADMIN[0]}"]).start()
    kafka_props = tmp / "kafka-admin.properties"  # Kafka's super user: PLAIN on INTERNAL
    kafka_props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f'sasl.jaas.config={PLAIN_JAAS} required username="{ADMIN[0]}" '
        f'password="{ADMIN[1]}";\n')
    ours_props = tmp / "admin.properties"
    ours_props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM_JAAS} required username="{ADMIN[0]}" '
        f'password="{ADMIN[1]}";\n')
    yield [("Kafka", f"127.0.0.1:{kafka_acl_broker.internal_port}",
            kafka_acl_broker.ports["SASL_PLAINTEXT"], kafka_props),
           ("offsetlog", server.bootstrap, server.ports["SASL_PLAINTEXT"], ours_props)]
    server.stop()


def kafka_configs(bootstrap: str, props, *args: str) -> str:
    java, classpath = kafka_tools()
    r = subprocess.run([java, "-cp", classpath,
                        "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap,
                        "--command-config", str(props), *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return "\n".join(line for line in r.stdout.splitlines() if line.strip())


def authenticates(port: int, user: str, password: str) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            scram_login(sock, user, password)
        except SaslFailed:
            return False
        return True


def eventually(predicate, tries: int = 100) -> bool:
    for _ in range(tries):
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_kafka_configs_adds_describes_and_deletes_a_scram_user(targets):
    user = f"bob-{uuid.uuid4().hex[:6]}"
    outputs = {}
    for name, bootstrap, sasl_port, props in targets:
        def run(*args):
            return kafka_configs(bootstrap, props, *args, "--entity-type", "users",
                                 "--entity-name", user)
        steps = [run("--alter", "--add-config",
                     "SCRAM-SHA-512=[iterations=8192,password=bob-secret]")]
        # Kafka's broker learns of credentials from its metadata log: ask until it has
        assert eventually(lambda: authenticates(sasl_port, user, "bob-secret")), name
        assert not authenticates(sasl_port, user, "wrong"), name
        steps.append(run("--describe"))
        steps.append(run("--alter", "--delete-config", "SCRAM-SHA-512"))
        assert eventually(lambda: not authenticates(sasl_port, user, "bob-secret")), (
            f"{name}: {user} still authenticates after --delete-config")
        steps.append(run("--describe"))
        outputs[name] = steps
    assert outputs["offsetlog"] == outputs["Kafka"]
    assert outputs["Kafka"][:2] == [
        f"Completed updating config for user {user}.",
        f"SCRAM credential configs for user-principal '{user}' are "
        "SCRAM-SHA-512=iterations=8192"]
