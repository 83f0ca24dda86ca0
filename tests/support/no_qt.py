"""A child process that cannot import Qt, as on a GPU server where PySide6 is not installed."""

from __future__ import annotations

import os
from pathlib import Path


def env_without_qt(folder: Path) -> dict[str, str]:
    """This process's environment with a ``PySide6`` first on the path that fails to import.

    Where the real PySide6 is installed it is shadowed: a child that imports Qt fails.
    """
    shim = folder / "no-qt" / "PySide6"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "__init__.py").write_text('raise ImportError("Qt is not installed on this machine")\n')
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(shim.parent), env.get("PYTHONPATH", "")) if part
    )
    return env
