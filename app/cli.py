"""``floodgate``: the app, or a subcommand (``bench``, ``soak``, ``serve``, ``pull``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``floodgate`` and ``python -m app``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["bench"]:
        from app.bench.cli import main as bench

        return bench(args[1:])
    if args[:1] == ["serve"]:
        from app.serve import main as serve

        return serve(args[1:])
    if args[:1] == ["soak"]:
        from app.soak.cli import main as soak

        return soak(args[1:])
    if args[:1] == ["pull"]:
        from app.pull import main as pull

        return pull(args[1:])
    from app.main import main as floodgate

    return floodgate(args)
