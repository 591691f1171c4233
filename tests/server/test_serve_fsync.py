"""``offsetlog serve --fsync``: the store is opened with the fsync policy given (the kafka
bench pairs Kafka's defaults with "interval" and flush.messages=1 with "always")."""

from __future__ import annotations

import pytest

from offsetlog.cli.main import build_parser


class _Opened(Exception):
    pass


@pytest.mark.parametrize("given, expected", [([], "always"), (["--fsync", "interval"], "interval"),
                                             (["--fsync", "never"], "never"),
                                             (["--fsync", "always"], "always")])
def test_serve_opens_the_store_with_the_fsync_given(monkeypatch, tmp_path, given, expected):
    from offsetlog.store import OffsetStore

    seen = {}

    def fake_open(path, **kw):
        seen.update(kw)
        raise _Opened

    monkeypatch.setattr(OffsetStore, "open", staticmethod(fake_open))
    args = build_parser().parse_args(["serve", str(tmp_path), "--listen", "127.0.0.1:0",
                                      *given])
    with pytest.raises(_Opened):
        args.func(args)
    assert seen["fsync"] == expected


def test_serve_refuses_an_unknown_fsync(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["serve", str(tmp_path), "--fsync", "sometimes"])
    assert e.value.code == 2
