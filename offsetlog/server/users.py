"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): the SASL/SCRAM users
over the wire (``kafka-configs --entity-type users``, the admin clients'
``describe_user_scram_credentials`` / ``alter_user_scram_credentials``), answered as Kafka's
broker answers them; and SaslHandshake and SaslAuthenticate after authentication.

An upsertion carries what Kafka's clients send: the salt, the iteration count and the salted
password (never the password); the server keeps the StoredKey and ServerKey made from it
(scram.py) in a ``USER_SCRAM_CREDENTIAL`` record. Each user's changes are written at once,
durable before the answer (a worker thread runs the writes).
"""

from __future__ import annotations

from offsetlog.server import errors as E
from offsetlog.server.context import Call, Context
from offsetlog.server.scram import credential_from_salted
from offsetlog.server.work import Outcome, run_blocking
from offsetlog.store.registries import MAX_ITERATIONS, MIN_ITERATIONS

#: Kafka's ScramMechanism codes
MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
CODES = {name: code for code, name in MECHANISM_CODES.items()}


def sasl_after_authentication(ctx: Context, call: Call, now_ms: int):
    """SaslHandshake or SaslAuthenticate on a connection that needs none (PLAINTEXT, SSL) or
    has authenticated already: ILLEGAL_SASL_STATE, as Kafka's broker answers."""
    if call.api_key == 17:
        return call.respond(error_code=E.ILLEGAL_SASL_STATE, mechanisms=[])
    return call.respond(error_code=E.ILLEGAL_SASL_STATE, auth_bytes=b"",
                        error_message="SaslAuthenticate request received after successful "
                                      "authentication")


def describe_user_scram_credentials(ctx: Context, call: Call, now_ms: int):
    stored = ctx.store.registries.scram_credentials()
    by_user: dict[str, list] = {}
    for (user, mechanism), value in stored.items():
        by_user.setdefault(user, []).append(
            dict(mechanism=CODES[mechanism], iterations=value["iterations"]))
    asked = [u.name for u in call.body.users or ()]
    results = []
    if not asked:
        results = [dict(user=u, error_code=E.NONE, error_message=None, credential_infos=infos)
                   for u, infos in sorted(by_user.items())]
    else:
        for name in dict.fromkeys(asked):
            if asked.count(name) > 1:
                results.append(dict(user=name, error_code=E.DUPLICATE_RESOURCE,
                                    error_message="Cannot describe SCRAM credentials for the "
                                                  f"same user twice in a single request: {name}",
                                    credential_infos=()))
            elif name not in by_user:
                results.append(dict(user=name, error_code=E.RESOURCE_NOT_FOUND,
                                    error_message="Attempt to describe a user credential that "
                                                  f"does not exist: {name}",
                                    credential_infos=()))
            else:
                results.append(dict(user=name, error_code=E.NONE, error_message=None,
                                    credential_infos=by_user[name]))
    return call.respond(error_code=E.NONE, error_message="", results=results)


def _check(change, deletion: bool) -> tuple[int, str | None]:
    if not change.name:
        return E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if int(change.mechanism) not in MECHANISM_CODES:
        return E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if not deletion:
        if change.iterations < MIN_ITERATIONS:
            return E.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if change.iterations > MAX_ITERATIONS:
            return E.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if not change.salt or not change.salted_password:
            return E.UNACCEPTABLE_CREDENTIAL, "Credential salt and salted password are required"
    return E.NONE, None


def alter_user_scram_credentials(ctx: Context, call: Call, now_ms: int):
    body = call.body
    changes = [(d, True) for d in body.deletions] + [(u, False) for u in body.upsertions]
    names = [c.name for c, _ in changes]
    results: dict[str, tuple[int, str | None]] = {}
    writes: list[tuple[str, str, dict | None]] = []
    registries = ctx.store.registries
    for change, deletion in changes:
        name = change.name
        if name in results:
            continue
        if names.count(name) > 1:
            # Kafka: a user altered twice in one request fails whole
            results[name] = (E.DUPLICATE_RESOURCE,
                             "A user credential cannot be altered twice in the same request")
            continue
        code, message = _check(change, deletion)
        if code == E.NONE:
            mechanism = MECHANISM_CODES[int(change.mechanism)]
            if deletion:
                if registries.scram_credential(name, mechanism) is None:
                    code, message = (E.RESOURCE_NOT_FOUND, "Attempt to delete a user "
                                     "credential that does not exist")
                else:
                    writes.append((name, mechanism, None))
            else:
                writes.append((name, mechanism, credential_from_salted(
                    mechanism, bytes(change.salted_password), bytes(change.salt),
                    int(change.iterations))))
        results[name] = (code, message)

    def write():
        failed = {}
        for name, mechanism, value in writes:
            try:
                registries.set_scram_credential(name, mechanism, value)
            except Exception as e:  # the store failed or closed: that user's answer says so
                failed[name] = e
        return failed

    def finish(outcome: Outcome):
        if outcome.error is not None:
            failed = {name: outcome.error for name, _, _ in writes}
        else:
            failed = outcome.value
        out = []
        for name, (code, message) in results.items():
            if name in failed:
                code, message = E.code_of(failed[name]), str(failed[name])
            out.append(dict(user=name, error_code=code, error_message=message))
        return call.respond(results=out)

    if not writes:
        return finish(Outcome({}))
    return run_blocking(write, finish)
