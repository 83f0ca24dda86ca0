"""What a bench run's figures were measured on (no Qt: the headless GPU check records it too)."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Any

from app.bench.plan import Setup
from app.engine.threads import machine_fingerprint, physical_cores


def machine_facts(
    setup: Setup, packages: tuple[str, ...] = ("llama-cpp-python",)
) -> dict[str, Any]:
    """The machine, the model, the threads and the versions of ``packages``."""
    versions: dict[str, str | None] = {}
    for dist in packages:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "cores": os.cpu_count(),
        "physical_cores": physical_cores(),
        "cpu": machine_fingerprint(),
        "threads": setup.options.n_threads,
        "threads_batch": setup.options.n_threads_batch,
        "model": setup.model.name,
        "model_bytes": setup.model.stat().st_size,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
    }
