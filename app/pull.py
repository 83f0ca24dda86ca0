"""``floodgate pull REPO[:FILE or QUANT]``: a model from the Hugging Face Hub, on the command line.

For machines without a screen. It lists the repository's GGUF models with a memory estimate
for this machine, takes the one named (a file name or a quantization such as Q4_K_M) or the
recommended one, and downloads it into the models folder with a progress bar. Ctrl+C, a
killed process or a dropped network keep what arrived: the same command resumes it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from app.defaults import N_CTX
from app.downloads.errors import DownloadError
from app.downloads.estimate import Assessment, assess, machine_memory
from app.downloads.files import ModelChoice, find_choice, size_text
from app.downloads.hub import Hub, RepoListing
from app.downloads.transfer import FileTransfer, remote_files
from app.store.paths import data_dir


def build_parser() -> argparse.ArgumentParser:
    """The ``floodgate pull`` command line."""
    parser = argparse.ArgumentParser(
        prog="floodgate pull",
        description=(
            "Download a GGUF model from the Hugging Face Hub (or HF_ENDPOINT's mirror) into "
            "Floodgate's models folder, verified against the Hub's sha256. Interrupted, the "
            "same command resumes it."
        ),
        epilog=(
            "examples:\n"
            "  floodgate pull bartowski/SmolLM2-1.7B-Instruct-GGUF          the recommended one\n"
            "  floodgate pull bartowski/SmolLM2-1.7B-Instruct-GGUF:Q4_K_M   by quantization\n"
            "  floodgate pull owner/repo:model-Q8_0.gguf                    by file name\n\n"
            "A gated repository needs an access token: HF_TOKEN, or the one kept by the app."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", help="REPO, REPO:QUANT or REPO:FILE")
    parser.add_argument(
        "--folder",
        type=Path,
        default=None,
        help="where the model goes (default: the models folder in FLOODGATE_HOME)",
    )
    parser.add_argument(
        "--context",
        type=int,
        default=N_CTX,
        help=f"context length the memory estimate counts with (default {N_CTX})",
    )
    return parser


def _describe(listing: RepoListing, assessment: Assessment) -> str:
    lines = [
        f"{listing.repo_id}  licence: {listing.license or 'not given'}"
        + ("  (gated)" if listing.gated else "")
    ]
    for index, (choice, estimate) in enumerate(
        zip(listing.choices, assessment.estimates, strict=True)
    ):
        mark = "  <- recommended" if index == assessment.recommended else ""
        parts = f" ({len(choice.files)} parts)" if choice.is_split else ""
        if choice.projector is not None:
            parts += f" + projector {choice.projector.name} ({size_text(choice.projector.size)})"
        lines.append(
            f"  {choice.quantization or '?':<10} {size_text(choice.size):>9}  "
            f"needs {size_text(estimate.total):>9}  {estimate.fit.value:<9} "
            f"{choice.label}{parts}{mark}"
        )
    if assessment.problem is not None:
        lines.append(f"  (memory counts weights only: {assessment.problem})")
    return "\n".join(lines)


def _pick(listing: RepoListing, wanted: str, assessment: Assessment) -> ModelChoice | None:
    if wanted:
        return find_choice(listing.choices, wanted)
    if assessment.recommended is None:
        return None
    return listing.choices[assessment.recommended]


def _show(bar: tqdm[Any], done: int) -> None:
    bar.update(done - bar.n)


def pull(spec: str, folder: Path, n_ctx: int) -> int:
    """Download the model ``spec`` names into ``folder``; the exit status."""
    repo_id, _, wanted = spec.partition(":")
    hub = Hub()
    with httpx.Client(trust_env=True, follow_redirects=True) as client:
        listing = hub.repository(repo_id)
        if not listing.choices:
            print(f"{repo_id} has no GGUF model Floodgate can download.", file=sys.stderr)
            return 1
        assessment = assess(
            client,
            listing.choices,
            partial(hub.file_url, listing.repo_id, listing.revision),
            hub.headers(),
            n_ctx,
            machine_memory(),
        )
        print(_describe(listing, assessment))
        choice = _pick(listing, wanted, assessment)
        if choice is None:
            what = f"no single model matches {wanted!r}" if wanted else "none fits this machine"
            print(f"Name one of them: {what}.", file=sys.stderr)
            return 1
        path: Path | None = None
        for remote in remote_files(hub.endpoint, listing, choice):
            with tqdm(
                total=remote.size, unit="B", unit_scale=True, unit_divisor=1024, desc=remote.name
            ) as bar:
                transfer = FileTransfer(
                    remote, folder, client, headers=hub.headers(), on_progress=partial(_show, bar)
                )
                finished = transfer.run()
            path = path or finished
    print(f"Ready: {path}\nOpen it with: floodgate --model {path}")
    return 0


def main(argv: Sequence[str]) -> int:
    """Entry point of ``floodgate pull``."""
    args = build_parser().parse_args(list(argv))
    folder = args.folder or data_dir() / "models"
    try:
        return pull(args.model, folder, args.context)
    except DownloadError as exc:
        print(exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "\nStopped. What arrived is kept: run the same command again to resume.",
            file=sys.stderr,
        )
        return 130
