"""``offsetlog crashtest`` (docs/CRASHTEST.md) and ``offsetlog bench`` (bench/runner.py)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from offsetlog.cli.output import Output, Styled


class UsageError(Exception):
    """A command line that cannot run as given: exit status 2, like argparse's own errors."""


def _option_value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text  # a bare string: fsync=always


def store_options(items: list[str]) -> dict:
    """``--option KEY=VALUE`` items as ``OffsetStore.open`` keywords; an unknown key or an
    item without ``=`` is a usage error (never a store the child fails to open, which the
    harness would count as violations)."""
    from offsetlog.recovery.crashtest.harness import check_store_options
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--option wants KEY=VALUE, not {item!r}")
        options[key.replace("-", "_")] = _option_value(value)
    try:
        check_store_options(options)
    except ValueError as e:
        raise UsageError(f"--option: {e}") from None
    return options


def cmd_crashtest(args: argparse.Namespace, out: Output) -> int:
    from offsetlog.recovery.crashtest.harness import config_from_options
    options = store_options(args.option)
    if args.workload and "" not in sys.path and os.getcwd() not in sys.path:
        # `--workload mymodule:fn` names a module in the current directory, as `python -m`
        # would find it; the installed `offsetlog` script does not put it on sys.path. The
        # children inherit it (the harness passes sys.path on as PYTHONPATH).
        sys.path.insert(0, os.getcwd())
    try:
        config = config_from_options(
            cycles=args.cycles, threads=args.threads, groups=args.groups,
            partitions=args.partitions, async_fraction=args.async_fraction,
            tear_tail=args.tear_tail, power_loss=args.power_loss, compaction=args.compaction,
            step_kills=not args.no_step_kills, snapshots=args.snapshots,
            segment_bytes=args.segment_bytes, store_options=options, seed=args.seed)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    # Recovery logs every torn tail it repairs; here that is the expected outcome. The level
    # is put back afterwards: the command may run inside a caller's process (tests do).
    engine_log = logging.getLogger("offsetlog")
    level_before = engine_log.level
    engine_log.setLevel(logging.ERROR)
    try:
        return _run(args, out, config)
    finally:
        engine_log.setLevel(level_before)


def _run(args: argparse.Namespace, out: Output, config) -> int:
    from offsetlog.recovery.crashtest.harness import run_crashtest
    try:
        with out.progress(config.cycles, "crash cycles", unit="items") as advance:
            result = run_crashtest(args.dir, config, workload=args.workload,
                                   progress=lambda k, r: advance(1))
    except ValueError as e:  # a directory that is not empty, a workload that does not load
        raise UsageError(str(e)) from None
    rows = [("cycles", result.cycles), ("seconds", f"{result.duration_s:.1f}"),
            ("commits acknowledged", result.acknowledged),
            ("calls applied (built-in workload)", result.applied),
            ("killed during start-up/recovery", result.killed_during_startup)]
    rows += [(f"killed at swap step {s}", n) for s, n in sorted(result.killed_at_step.items())]
    rows += [("tails torn by the harness", result.tails_torn),
             ("of those, holes before kept bytes", result.holes),
             ("of the holes, before durable bytes", result.cut_before_durable),
             ("bytes cut", result.bytes_cut),
             ("torn tails repaired by recovery", result.torn_tails_repaired),
             ("violations", len(result.violations))]
    out.table(("WHAT", "COUNT"), [[what, str(n)] for what, n in rows],
              title=f"crashtest {args.dir} (seed {result.seed})", right=("COUNT",))
    for v in result.violations:
        out.line(Styled(f"VIOLATION {v}", "red"))
    out.line(f"{result.cycles} cycles, {result.acknowledged} commits acknowledged, "
             f"{len(result.violations)} violations"
             + ("" if result.ok else f" (replay with --seed {result.seed})"))
    return 0 if result.ok else 1


def cmd_bench(args: argparse.Namespace, out: Output) -> int:
    from offsetlog.bench.runner import main as bench_main  # heavy, and rarely run
    return bench_main(args.bench_args)
