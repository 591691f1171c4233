"""The SCRAM exchange (offsetlog.server.scram) against kafka-python's client side of it, and
the attacks on it: a nonce that does not extend the client's, a replayed final message,
malformed and oversized messages, an unknown user that fails as a wrong password does."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from offsetlog.server.scram import (
    MAX_MESSAGE,
    ScramError,
    ScramServer,
    check_password,
    make_credential,
)

MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def server_for(mechanism, users):
    return ScramServer(mechanism, lambda user: users.get(user))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_client_authenticates_and_checks_the_server(mechanism):
    users = {"alice": make_credential(mechanism, "s3cret")}
    client = ScramClient("alice", "s3cret", mechanism)
    server = server_for(mechanism, users)
    server_first = server.first(client.first_message())
    client.process_server_first_message(server_first)
    server_final = server.final(client.final_message())
    client.process_server_final_message(server_final)  # raises unless proven
    assert server.state == "done" and server.user == "alice"


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("mallory", "s3cret")])
def test_a_wrong_password_and_an_unknown_user_fail_alike_at_the_proof(mechanism, user, password):
    users = {"alice": make_credential(mechanism, "s3cret")}
    client = ScramClient(user, password, mechanism)
    server = server_for(mechanism, users)
    first = server.first(client.first_message())  # an unknown user gets a salt too
    assert first.startswith(b"r=") and b",s=" in first and b",i=4096" in first
    client.process_server_first_message(first)
    with pytest.raises(ScramError, match="invalid credentials"):
        server.final(client.final_message())


def test_the_fake_salt_of_an_unknown_user_is_stable():
    a = server_for("SCRAM-SHA-256", {}).first(b"n,,n=ghost,r=abc")
    b = server_for("SCRAM-SHA-256", {}).first(b"n,,n=ghost,r=xyz")
    assert a.split(b",")[1] == b.split(b",")[1]


def exchange(mechanism="SCRAM-SHA-256"):
    users = {"alice": make_credential(mechanism, "pw")}
    client = ScramClient("alice", "pw", mechanism)
    server = server_for(mechanism, users)
    client.process_server_first_message(server.first(client.first_message()))
    return client, server


def test_a_nonce_that_does_not_extend_the_clients_fails():
    client, server = exchange()
    final = client.final_message()
    # the whole nonce (after the server-first, kafka-python's client.nonce holds the server's
    # extension too) with its last character changed to one it is not: that character is random
    # base64, so a fixed replacement would forge nothing one time in 64
    last = client.nonce[-1:]
    forged = final.replace(b"r=" + client.nonce,
                           b"r=" + client.nonce[:-1] + (b"Y" if last == b"X" else b"X"))
    assert forged != final
    with pytest.raises(ScramError, match="nonce"):
        server.final(forged)


def test_a_server_first_from_elsewhere_is_refused_by_the_client():
    users = {"alice": make_credential("SCRAM-SHA-256", "pw")}
    client = ScramClient("alice", "pw", "SCRAM-SHA-256")
    other = server_for("SCRAM-SHA-256", users)
    other.first(b"n,,n=alice,r=notyours")
    with pytest.raises(Exception):
        client.first_message()
        client.process_server_first_message(other.server_first.encode())


def test_a_replayed_client_final_fails():
    client, server = exchange()
    final = client.final_message()
    server.final(final)
    with pytest.raises(ScramError):
        server.final(final)
    # nor does it pass a new exchange: the server's nonce differs
    fresh = server_for("SCRAM-SHA-256", {"alice": server.credential})
    fresh.first(b"n,," + client.auth_message.split(b",r=")[0] + b",r=" + final.split(b",r=")[1][:32])
    with pytest.raises(ScramError, match="nonce"):
        fresh.final(final)


@pytest.mark.parametrize("message", [
    b"", b"n", b"n,,", b"p=tls-unique,,n=a,r=x", b"n,,r=x,n=a", b"n,,n=,r=x", b"n,,n=a=,r=x",
    b"n,,n=a,r=", b"\xff\xfe", b"n,,n=a,r=x,t=tokenauth", b"x" * (MAX_MESSAGE + 1),
    b"n,a=bob,n=alice,r=x",
])
def test_malformed_client_first_messages_fail(message):
    with pytest.raises(ScramError):
        server_for("SCRAM-SHA-256", {}).first(message)


@pytest.mark.parametrize("tamper", [
    lambda m: m.split(b",p=")[0],  # no proof
    lambda m: m[:-4],  # truncated proof
    lambda m: m.replace(b"c=biws", b"c=" + base64.b64encode(b"y,,")),  # other gs2 header
    lambda m: b"r=x," + m,
    lambda m: m + b"\x00",
])
def test_tampered_client_final_messages_fail(tamper):
    client, server = exchange()
    with pytest.raises(ScramError):
        server.final(tamper(client.final_message()))


def test_final_before_first_fails():
    with pytest.raises(ScramError):
        server_for("SCRAM-SHA-256", {}).final(b"c=biws,r=x,p=AAAA")


def test_the_stored_credential_holds_no_password():
    c = make_credential("SCRAM-SHA-512", "hunter2")
    assert set(c) == {"salt", "iterations", "stored_key", "server_key"}
    assert c["iterations"] >= 4096 and len(c["salt"]) == 64
    assert b"hunter2" not in b"".join(v for v in c.values() if isinstance(v, bytes))
    assert check_password("SCRAM-SHA-512", c, b"hunter2")
    assert not check_password("SCRAM-SHA-512", c, b"hunter3")
