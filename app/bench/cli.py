"""``floodgate bench``: the command line."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

import qasync
from PySide6.QtWidgets import QApplication

from app.bench.plan import Plan, Setup
from app.bench.report import table, write_json
from app.bench.run import run
from app.defaults import default_threads
from app.engine import EngineOptions
from app.store.paths import default_model_path


def main(argv: Sequence[str]) -> int:
    """``floodgate bench [--quick] [--model PATH] [--json PATH] [--threads N]``."""
    import app.bench

    parser = argparse.ArgumentParser(prog="floodgate bench", description=app.bench.__doc__)
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--quick", action="store_true", help="a short run (checks the shape)")
    parser.add_argument("--threads", type=int, default=default_threads())
    args = parser.parse_args(list(argv))
    qt = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(qt, QApplication)
    setup = Setup(
        model=args.model or default_model_path(),
        plan=Plan.make(args.quick),
        options=EngineOptions(n_threads=args.threads),
    )
    with asyncio.Runner(loop_factory=lambda: qasync.QEventLoop(qt)) as runner:
        doc = runner.run(run(setup))
    print(table(doc))
    if args.json is not None:
        write_json(doc, args.json)
    return 0
