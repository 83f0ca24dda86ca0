"""``floodgate bench``: the flow measured by the app itself, beside baselines, in one run.

Runs the real pipeline (worker thread, bounded queue, frame pump, chat view in the main
window) offscreen on a GGUF model, next to llama-cpp-python's own streaming loop, a lean loop
over its C API and the designs other chat apps use, and prints a table and writes JSON. See
README, "Measured".

The parts: :mod:`~app.bench.plan` (what is measured, how much, the targets),
:mod:`~app.bench.stats` (pairs, medians, confidence intervals), the app's measurements
(:mod:`~app.bench.measure`, :mod:`~app.bench.thread_counts`, :mod:`~app.bench.stops`,
:mod:`~app.bench.long_reply`), the engine's (:mod:`~app.bench.prefill`, :mod:`~app.bench.ttft`
over :mod:`~app.bench.engine_drive`), the baselines (:mod:`~app.bench.loops` for
llama-cpp-python, run in a bare child process by :mod:`~app.bench.bare`;
:mod:`~app.bench.designs` for the per-piece designs), the server (:mod:`~app.bench.remote`),
replies side by side (:mod:`~app.bench.parallel`), the report (:mod:`~app.bench.report`, and
:mod:`~app.bench.chart` for the picture), and :mod:`~app.bench.run` and :mod:`~app.bench.cli`
that put them together.
"""

from __future__ import annotations

import os

# Before any Qt import (this package runs before its modules): the bench runs headless unless
# told otherwise. The command line is :func:`app.bench.cli.main`.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
