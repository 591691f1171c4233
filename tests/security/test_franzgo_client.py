"""franz-go (tests/clients/franzgo/, TLS and SCRAM from its environment) joins a group and
commits over SASL_SSL with SCRAM-SHA-512 and -256, and over SSL with a client
certificate."""

from __future__ import annotations

import os

import pytest

from support.client_runners import MemberProcess, franzgo_binary

from .conftest import USERS


@pytest.fixture(scope="module")
def franzgo():
    return franzgo_binary()


def run_member(binary, server, protocol, group_id, env):
    m = MemberProcess([binary, "member", f"127.0.0.1:{server.ports[protocol]}", group_id,
                       "orders", "range", "franz-sec", "-", "6000"], "franz-go secure",
                      env={**os.environ, **env})
    try:
        assigned = m.wait_for(lambda e: e.get("event") == "assigned"
                              and e.get("partitions") == [0, 1, 2, 3], timeout=60,
                              what="assignment")
        assert assigned
        m.send("commit 0 17")
        done = m.wait_for(lambda e: e.get("event") == "committed", what="commit")
        assert done.get("error") is None, done
        m.send("committed")
        assert m.wait_for(lambda e: e.get("event") == "offsets")["offsets"]["0"] == 17
    finally:
        m.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_franzgo_over_sasl_ssl(franzgo, secure_server, certs, group_id, mechanism):
    run_member(franzgo, secure_server, "SASL_SSL", group_id, {
        "FRANZGO_TLS_CA": str(certs.ca), "FRANZGO_SASL_MECHANISM": mechanism,
        "FRANZGO_SASL_USER": "alice", "FRANZGO_SASL_PASSWORD": USERS["alice"]})


def test_franzgo_over_ssl_with_a_client_certificate(franzgo, secure_server, certs, group_id):
    run_member(franzgo, secure_server, "SSL", group_id, {
        "FRANZGO_TLS_CA": str(certs.ca), "FRANZGO_TLS_CERT": str(certs.client_cert),
        "FRANZGO_TLS_KEY": str(certs.client_key)})
