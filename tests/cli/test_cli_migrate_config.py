"""offsetlog migrate's arguments and --command-config, without a cluster (issue 29)."""

import pytest

from offsetlog.cli import main
from offsetlog.cli.crashtest_cmd import UsageError
from offsetlog.cli.kafka_admin import read_properties
from support.stores import open_store


def test_command_config_is_read_as_kafka_tools_read_it(tmp_path):
    f = tmp_path / "client.properties"
    f.write_text("# a comment\n! another\nsecurity.protocol=SASL_SSL\n"
                 "sasl.mechanism : SCRAM-SHA-512\n"
                 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule '
                 'required username="svc" password="s3=cr:et";\n'
                 "ssl.ca.location = /etc/ca.pem\n\n")
    assert read_properties(str(f)) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "svc", "sasl.password": "s3=cr:et", "ssl.ca.location": "/etc/ca.pem"}
    f.write_text("just words\n")
    with pytest.raises(UsageError, match="not a property"):
        read_properties(str(f))


def test_bad_client_settings_and_arguments_are_usage_errors(tmp_path, capsys):
    src = str(tmp_path / "s")
    with open_store(src, partitions=3):
        pass
    f = tmp_path / "client.properties"
    f.write_text("no.such.client.property=1\n")
    assert main(["migrate", src, "--to", "127.0.0.1:1", "--command-config", str(f)]) == 2
    assert "no.such.client.property" in capsys.readouterr().err
    assert main(["migrate", src]) == 2
    assert main(["migrate", src, "--to", "a:1", "--from", "b:1"]) == 2
    assert main(["migrate", src, "--to", "a:1", "--command-config",
                 str(tmp_path / "absent")]) == 2
    assert main(["migrate", str(tmp_path / "nothing"), "--to", "a:1"]) == 2
    assert "exactly one of --to" in capsys.readouterr().err
