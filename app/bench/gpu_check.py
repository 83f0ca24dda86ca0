"""``make gpu-check``: the bench's ``gpu`` section on this machine's GPU, with no window.

A machine with a GPU is often one without a display, or one a model is carried to for an
hour: this runs the very function the whole bench runs for its ``gpu`` section
(:func:`app.bench.gpu.gpu`: rates at every, half and no layer, llama-cpp-python on the same
GPU, Stop in a prompt and in a reply, the fit), without Qt, and prints its lines. With
``--speculative`` it also runs the ``speculative`` section with every layer on that GPU (the
native loop and llama-cpp-python's prompt lookup in the bare child offload every layer too):
on a GPU, checking a draft of several tokens costs about what one token does, which a 2-core
CPU cannot give.

    python -m app.bench.gpu_check [--model PATH] [--json PATH] [--quick] [--speculative]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.bench.gpu import gpu
from app.bench.machine import machine_facts
from app.bench.plan import Plan, Setup
from app.bench.report import table, write_json
from app.bench.speculative import speculative
from app.engine import EngineOptions
from app.engine.placement import CPU
from app.engine.threads import physical_cores
from app.store.paths import default_model_path


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; print its lines and (``--json``) write its figures."""
    parser = argparse.ArgumentParser(prog="python -m app.bench.gpu_check", description=__doc__)
    parser.add_argument("--model", type=Path, default=None, help="a GGUF file (default: bundled)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--quick", action="store_true", help="a short run (checks the shape)")
    parser.add_argument(
        "--speculative", action="store_true", help="also the drafts' section on the GPU"
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    cores = physical_cores()
    setup = Setup(
        model=args.model or default_model_path(),
        plan=Plan.make(args.quick),
        # The gpu section places the model itself; the CPU here is the bare child's reference.
        options=EngineOptions(n_threads=cores, n_threads_batch=cores, compute=CPU),
    )
    setup.log("the GPU: layers offloaded, llama-cpp-python on it, Stop, the fit…")
    doc: dict[str, Any] = {"gpu": gpu(setup), "machine": machine_facts(setup)}
    _report("gpu", doc, args.json)
    if args.speculative and doc["gpu"]["present"]:
        device = doc["gpu"]["device"]
        setup.log(f"drafts from the context on {device}…")
        # Every layer on the device (gpu_layers None: all), as Auto puts a model that fits.
        on_device = replace(setup.options, compute=device, gpu_layers=None)
        doc["speculative"] = {"device": device, **speculative(replace(setup, options=on_device))}
        _report("speculative", doc, args.json)
    return 0


def _report(section: str, doc: dict[str, Any], path: Path | None) -> None:
    """Print a section's lines; write the document so far (a later section may not end)."""
    print(table({section: doc[section], "machine": doc["machine"]}), flush=True)
    if path is not None:
        write_json(doc, path)


if __name__ == "__main__":
    raise SystemExit(main())
