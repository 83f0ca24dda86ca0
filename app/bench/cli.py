"""``floodgate bench``: the command line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

import qasync
from PySide6.QtWidgets import QApplication

from app.bench.chart import draw
from app.bench.held import CannotHoldError, Held, hold
from app.bench.plan import Plan, Setup
from app.bench.report import table, write_json
from app.bench.run import SECTIONS, run
from app.engine import EngineOptions
from app.engine.placement import CPU as CPU_ONLY
from app.engine.threads import physical_cores
from app.store.paths import default_model_path
from app.trace import TRACE


def main(argv: Sequence[str]) -> int:
    """``floodgate bench``; ``--help`` lists its options (``--only SECTION``: one section alone)."""
    import app.bench  # the package, not a sibling: its docstring

    # The package's first paragraph says what the bench does; the rest is a map for developers.
    about = (app.bench.__doc__ or "").split("\n\n")[:2]
    parser = argparse.ArgumentParser(prog="floodgate bench", description="\n\n".join(about))
    parser.add_argument("--model", type=Path, default=None, help="a GGUF file (default: bundled)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--quick", action="store_true", help="a short run (checks the shape)")
    parser.add_argument(
        "--pairs",
        type=int,
        default=None,
        help="pairs for the throughput ratios (per reference; default 15, 3 with --quick) and "
        "the diagnostics panel's (default 9, 1 with --quick): more narrow their intervals "
        "where the machine is noisy (40 take about 10 minutes with --only throughput on a "
        "2-core machine)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="decode and prompt threads (default: as the app chooses: decode threads measured "
        f"by its worker, prompts on every physical core, {physical_cores()} here)",
    )
    parser.add_argument(
        "--trace", type=Path, default=None, help="record the whole run as a flow trace here"
    )
    parser.add_argument(
        "--chart", type=Path, default=None, help="draw the comparison here (default: beside --json)"
    )
    parser.add_argument(
        "--only", choices=SECTIONS, default=None, help="run one section alone (no chart)"
    )
    parser.add_argument(
        "--cpus",
        type=float,
        default=None,
        help="hold the whole run (baselines too) to this many CPUs' time, by a cgroup's CPU "
        "bandwidth, so that a fast machine's rates fall where a slower one's are (Linux)",
    )
    args = parser.parse_args(list(argv))
    if args.pairs is not None and args.pairs < 1:
        parser.error(f"--pairs: at least 1, not {args.pairs}")
    with contextlib.ExitStack() as stack:
        held: Held | None = None
        if args.cpus is not None:
            try:
                held = stack.enter_context(hold(args.cpus))
            except (CannotHoldError, ValueError) as error:
                parser.error(f"--cpus: {error}")
            print(f"held to {held.cpus} CPUs' time ({held.quota_us} us every {held.period_us} us)")
        return _bench(args, held)


def _bench(args: argparse.Namespace, held: Held | None) -> int:
    """The run itself, once it is held where ``--cpus`` said."""
    qt = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(qt, QApplication)
    # As in the app (app/main.py): the run ends when its sections do, not when Qt sees the
    # last of their windows close (a section's window closing between two others ended it).
    qt.setQuitOnLastWindowClosed(False)
    setup = Setup(
        model=args.model or default_model_path(),
        plan=Plan.make(args.quick, pairs=args.pairs),
        # The flow's sections compare the app with llama-cpp-python on the CPU, like with
        # like; the gpu section puts the model on the GPU itself, as the app's Auto would.
        options=EngineOptions(
            n_threads=args.threads, n_threads_batch=args.threads, compute=CPU_ONLY
        ),
    )
    TRACE.name_thread("UI")  # as the app names its own (in traces of the bench's replies too)
    if args.trace is not None:
        args.trace.parent.mkdir(parents=True, exist_ok=True)
        TRACE.start(args.trace)
    try:
        with asyncio.Runner(loop_factory=lambda: qasync.QEventLoop(qt)) as runner:
            doc = runner.run(run(setup, args.only))
    finally:
        if args.trace is not None:
            TRACE.stop()
    if held is not None:
        doc["machine"]["held"] = dataclasses.asdict(held)
    print(table(doc))
    if args.json is not None:
        write_json(doc, args.json)
    chart = args.chart or (args.json.with_suffix(".png") if args.json is not None else None)
    if chart is not None and args.only is None:
        draw(doc, chart)
    return 0
