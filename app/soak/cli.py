"""``floodgate soak``: the command line, and one run of the soak as it asks."""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from app.soak.driver import Soak
from app.soak.report import SoakReport, write_report


def build_parser() -> argparse.ArgumentParser:
    """The ``floodgate soak`` command line."""
    parser = argparse.ArgumentParser(
        prog="floodgate soak",
        description="Random Send/Stop/regenerate/switch/close cycles on the real window "
        "with the real model; checks threads, memory, greedy replies and the history file.",
    )
    parser.add_argument("--cycles", type=int, default=500, help="cycles to run (default 500)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument("--model", type=Path, default=None, help="GGUF file (default: bundled)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for the model")
    parser.add_argument("--max-tokens", type=int, default=48, help="tokens per reply (default 48)")
    parser.add_argument(
        "--probe-every", type=int, default=25, help="cycles between probes (default 25)"
    )
    parser.add_argument(
        "--home",
        type=Path,
        default=None,
        help="data directory (default: a new temporary one, removed afterwards)",
    )
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    return parser


def run(args: argparse.Namespace) -> SoakReport:
    """Run the soak as ``args`` say; returns its report."""
    from app.main import main as floodgate
    from app.store.database import database_path
    from app.store.paths import HOME_VARIABLE, default_model_path

    home_dir = None if args.home else tempfile.TemporaryDirectory(prefix="floodgate-soak-")
    home = args.home or Path(home_dir.name if home_dir else ".")
    previous = os.environ.get(HOME_VARIABLE)
    os.environ[HOME_VARIABLE] = str(home)
    log = (lambda _text: None) if args.quiet else (lambda text: print(text, flush=True))
    soak = Soak(
        args.cycles,
        args.seed,
        max_tokens=args.max_tokens,
        probe_every=args.probe_every,
        log=log,
        json_path=args.json,
    )
    argv = ["--model", str(args.model or default_model_path())]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    try:
        starts = 0
        while not soak.finished and soak.cycle < args.cycles:
            starts += 1
            if starts > args.cycles + 1:
                soak.report.problems.append("Floodgate kept ending before its cycles")
                break
            floodgate(argv, driver=soak.drive)
        soak.report.seconds = round(time.monotonic() - soak.started_at, 1)
        soak.check_database(database_path())
    finally:
        if previous is None:
            os.environ.pop(HOME_VARIABLE, None)
        else:
            os.environ[HOME_VARIABLE] = previous
        if home_dir is not None:
            with contextlib.suppress(OSError):
                home_dir.cleanup()
    return soak.report


def main(argv: Sequence[str]) -> int:
    """Entry point of ``floodgate soak``: 0 when everything held, 1 otherwise."""
    args = build_parser().parse_args(list(argv))
    report = run(args)
    print(report.summary(), flush=True)
    if args.json:
        write_report(report, args.json)
    return 0 if report.ok else 1


__all__ = ["build_parser", "main", "run"]
