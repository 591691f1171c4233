"""The README's network example, run as written: its ``sh`` block (users made at a prompt,
``offsetlog serve`` with a certificate, SCRAM and the authorizer, two ``kafka-acls`` lines)
and its ``admin.properties`` block are read from README.md and run with only the
substitutions below (paths of this test's files, and loopback for the wildcard address, whose
Metadata answer would be the machine's name, which the test certificate does not hold); then
a client with the README's client settings uses what the ACLs grant, and no more."""

from __future__ import annotations

import fcntl
import os
import re
import select
import shlex
import subprocess
import sys
import termios
import time

import pytest

from support.kafka_broker import kafka_tools
from support.layers import REPO

PASSWORDS = {"admin": "admin-Secret-1", "billing": "billing-Secret-2"}


def readme_blocks() -> tuple[list[str], str]:
    """(the commands of the network example's sh block, its admin.properties block)."""
    text = open(os.path.join(REPO, "README.md")).read()
    start = text.index("To run\nit on a network")
    sh = re.search(r"```sh\n(.*?)```", text[start:], re.S).group(1)
    props = re.search(r"```properties\n(.*?)```", text[start:], re.S).group(1)
    return sh.replace("\\\n", " ").splitlines(), props


def substitute(text: str, subs: dict[str, str], used: set[str]) -> str:
    for old, new in subs.items():
        if old in text:
            used.add(old)
            text = text.replace(old, new)
    return text


def users_add_at_a_prompt(argv: list[str], password: str) -> None:
    """Run ``offsetlog users ... add`` on a terminal of its own (a pty: getpass reads
    /dev/tty) and type the password at each prompt."""
    master, slave = os.openpty()

    def own_terminal():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True, preexec_fn=own_terminal)
    os.close(slave)
    seen = b""
    try:
        for prompt in (b"password for", b"again:"):
            deadline = time.monotonic() + 30
            while prompt not in seen:
                assert time.monotonic() < deadline, f"no prompt {prompt!r}: {seen!r}"
                if select.select([master], [], [], 1)[0]:
                    seen += os.read(master, 1024)
            seen = b""
            os.write(master, password.encode() + b"\n")
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        while select.select([master], [], [], 0)[0]:
            try:
                if not os.read(master, 1024):
                    break
            except OSError:
                break
        os.close(master)


def test_the_readme_network_example(tmp_path, certs):
    java, classpath = kafka_tools()
    commands, props = readme_blocks()
    used: set[str] = set()
    subs = {"/var/lib/offsets": str(tmp_path / "offsets"),
            "/etc/offsetlog/server.pem": str(certs.server_pem),
            "/etc/offsetlog/ca.pem": str(certs.ca),
            "0.0.0.0:9093": "127.0.0.1:0",
            "ADMIN-PASSWORD": PASSWORDS["admin"]}
    (tmp_path / "admin.properties").write_text(substitute(props, subs, used))
    server = None
    try:
        for line in commands:
            if line.startswith("# listening on "):  # what serve prints, checked below
                expected = line[2:]
                continue
            argv = shlex.split(substitute(line, subs, used), comments=True)
            if argv[0] == "offsetlog" and argv[1] == "users":
                users_add_at_a_prompt([sys.executable, "-m", "offsetlog", *argv[1:]],
                                      PASSWORDS[argv[4]])
            elif argv[0] == "offsetlog" and argv[1] == "serve":
                server = subprocess.Popen([sys.executable, "-m", "offsetlog", *argv[1:]],
                                          stderr=subprocess.PIPE, text=True)
                listening = server.stderr.readline().strip()
                port = int(listening.rsplit(":", 1)[1])
                subs["HOST:9093"] = f"127.0.0.1:{port}"
            elif argv[0] == "kafka-acls":
                r = subprocess.run([java, "-cp", classpath,
                                    "org.apache.kafka.tools.AclCommand", *argv[1:]],
                                   capture_output=True, text=True, timeout=120, cwd=tmp_path)
                assert r.returncode == 0, r.stdout + r.stderr
                assert "Adding ACLs for resource" in r.stdout, r.stdout
            else:
                raise AssertionError(f"the README runs a command this test does not: {line}")
        assert used == set(subs), f"substitutions no longer in the README: {set(subs) - used}"
        assert listening == expected.replace("0.0.0.0:9093", f"127.0.0.1:{port}")
        billing_uses_what_it_was_granted(port, certs)
    finally:
        if server is not None:
            server.terminate()
            server.wait(20)


def billing_uses_what_it_was_granted(port, certs):
    """The README's client settings as ``billing``: its group commits on ``orders``, its
    transactional id (a ``billing-`` one) commits offsets in a transaction; another group
    and another transactional id are refused."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "billing",
            "sasl.password": PASSWORDS["billing"], "ssl.ca.location": str(certs.ca)}
    c = Consumer({**conf, "group.id": "billing", "enable.auto.commit": False,
                  "session.timeout.ms": 6000})
    try:
        c.subscribe(["orders"])
        deadline = time.monotonic() + 60
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment(), "billing's consumer got no partitions"
        c.commit(offsets=[TopicPartition("orders", 0, 1042)], asynchronous=False)
        assert c.committed([TopicPartition("orders", 0)], timeout=10)[0].offset == 1042
        p = Producer({**conf, "transactional.id": "billing-1"})
        p.init_transactions(30)
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition("orders", 1, 7)],
                                      c.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        assert c.committed([TopicPartition("orders", 1)], timeout=10)[0].offset == 7
    finally:
        c.close()
    other = Consumer({**conf, "group.id": "payroll", "enable.auto.commit": False})
    try:
        other.subscribe(["orders"])
        errors = []
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline:
            m = other.poll(0.2)
            if m is not None and m.error():
                errors.append(m.error().code())
        assert errors == [KafkaError.GROUP_AUTHORIZATION_FAILED]
        assert not other.assignment()
    finally:
        other.close()
    stranger = Producer({**conf, "transactional.id": "payroll-1"})
    with pytest.raises(KafkaException) as refused:
        stranger.init_transactions(30)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
