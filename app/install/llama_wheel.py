"""Build llama-cpp-python for this machine with instruction sets named explicitly, and keep it.

Why not llama.cpp's default: it builds with ``GGML_NATIVE=ON`` (``-march=native``), which on a
CPU with AMX compiles ggml's AMX matrix multiply, and that segfaults on every batch of two
tokens or more on Sapphire Rapids cloud VMs (llama.cpp #20824). A native build also dies with
SIGILL on any other machine it is copied to. So the flags are chosen here, each instruction set
named on or off, and AMX is never among them.

The default, ``portable``, is x86-64's AVX2 generation (AVX2, FMA, F16C, BMI2: every x86 CPU
since 2013-2015) when the building CPU has it: measured on an AVX-512 machine it decodes and
processes prompts within 3 % of a native build, and AVX-512 gained nothing measurable
(ARCHITECTURE.md, "Measured facts"), while a build without it runs on every AVX2 machine it is
copied to. ``cpu`` adds every other set the building CPU has (AVX-512, AVX-VNNI), for a machine
where measurement shows a gain.

Why not pip's wheel cache: pip keys a built wheel by the sdist alone, not by ``CMAKE_ARGS``, so
a wheel built for one machine's flags is picked up on another, and a change of flags does not
rebuild. Floodgate keeps its own folder of wheels, one per digest of (llama-cpp-python version,
flags, Python, platform), and pip builds without its cache.

The GPU: ``--gpu vulkan|cuda|metal|none`` (``auto``, the default at the first setup, builds
for the GPU :mod:`app.install.gpu_probe` finds). Vulkan and CUDA are built with llama.cpp's
``GGML_BACKEND_DL``: the CPU backend and the GPU backend are modules of their own, so the app
starts the GPU's driver only after a child process listed the devices without crashing, and
"CPU only" never starts it (ARCHITECTURE.md, "The GPU"). Where a GPU build fails, setup keeps
the CPU build and says why, and which command tries again. The sources are patched only where
a patch is needed (the Vulkan headers of Debian 12 lack ``VK_EXT_layer_settings``: see
``patches/``), and the patches are part of the wheel's digest.

Run by the Makefile with the venv's Python, from the project folder::

    python -m app.install.llama_wheel [--cpu portable|cpu|baseline] [--gpu auto|vulkan|cuda|
        metal|none] [--unpack FOLDER] [--dry-run]

Standard library only: this runs before Floodgate's dependencies are installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.install import gpu_probe

VERSION = "0.3.36"
"""The llama-cpp-python release Floodgate is built and measured on (pyproject.toml pins it)."""

PROFILES = ("portable", "cpu", "baseline")
"""``portable`` (the default): the AVX2 generation when this CPU has it, else the baseline.
``cpu``: every instruction set this CPU has that ggml uses, AMX excepted.
``baseline``: nothing beyond what every CPU of the architecture has (SSE4.2 on x86-64): slower,
but it runs anywhere; the rebuild that the self-test proposes when a build crashes."""

DEFAULT_PROFILE = "portable"

_PORTABLE = frozenset({"GGML_SSE42", "GGML_AVX", "GGML_F16C", "GGML_FMA", "GGML_BMI2", "GGML_AVX2"})
"""The sets of x86-64's AVX2 generation (x86-64-v3)."""

GPUS = ("none", "vulkan", "cuda", "metal")
"""The GPU backends a build can have (``none``: the CPU alone)."""

AUTO = "auto"
"""Build for the GPU this machine has (:func:`app.install.gpu_probe.detect`)."""

_MODULAR = ("vulkan", "cuda")
"""GPUs built as backend modules (``GGML_BACKEND_DL``): the driver starts only when asked."""

PATCHES = Path(__file__).resolve().parent / "patches"

SAFE_REBUILD = "make llama LLAMA_CPU=baseline"
"""The one command that rebuilds llama.cpp with the flags that run on any machine."""

RECORD_NAME = "floodgate-llama.json"
"""The file in the venv that says which wheel is installed there, and with which profile."""

CACHE_VARIABLE = "FLOODGATE_WHEEL_CACHE"
"""Environment variable naming the folder of built wheels (default: the user's cache folder)."""

# ggml's CMake option for each x86 instruction set, and the CPU flags (Linux /proc/cpuinfo
# names) that must all be present to turn it on. Order is ggml's.
_X86_SETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("GGML_SSE42", ("sse4_2",)),
    ("GGML_AVX", ("avx",)),
    ("GGML_F16C", ("f16c",)),
    ("GGML_FMA", ("fma",)),
    ("GGML_BMI2", ("bmi2",)),
    ("GGML_AVX2", ("avx2",)),
    ("GGML_AVX_VNNI", ("avx_vnni",)),
    # ggml's AVX512 option compiles with -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw.
    ("GGML_AVX512", ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")),
    ("GGML_AVX512_VBMI", ("avx512vbmi",)),
    ("GGML_AVX512_VNNI", ("avx512_vnni",)),
    ("GGML_AVX512_BF16", ("avx512_bf16",)),
)

# Never on, whatever the CPU says: the AMX kernels crash (see the module's docstring).
_NEVER = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")

# macOS names some features differently in `sysctl machdep.cpu`.
_MACOS_NAMES = {"sse4.2": "sse4_2", "avx1.0": "avx", "avx512vnni": "avx512_vnni"}


@dataclass(frozen=True)
class Build:
    """One way of building llama-cpp-python, and where its wheel is kept."""

    profile: str
    cmake_args: tuple[str, ...]
    digest: str
    gpu: str = "none"
    patches: tuple[Path, ...] = ()

    @property
    def folder_name(self) -> str:
        """The name of this build's folder in the wheel cache."""
        kind = "" if self.gpu == "none" else f"{self.gpu}-"
        return f"llama-cpp-python-{VERSION}-{kind}{self.digest[:16]}"


def cpu_features() -> frozenset[str]:
    """The instruction-set flags of this machine's CPU, lower case, in Linux's spelling.

    Empty where they cannot be read; the flags then fall back to the architecture's baseline.
    """
    try:
        if sys.platform.startswith("linux"):
            text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
            for line in text.splitlines():
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.lower().split())
        elif sys.platform == "darwin":
            found: set[str] = set()
            for key in ("machdep.cpu.features", "machdep.cpu.leaf7_features"):
                out = subprocess.run(
                    ["sysctl", "-n", key], capture_output=True, text=True, check=False
                ).stdout
                found.update(_MACOS_NAMES.get(f, f) for f in out.lower().split())
            return frozenset(found)
    except OSError:
        pass
    return frozenset()


def cmake_args(
    profile: str, machine: str, features: frozenset[str], gpu: str = "none", cuda_arch: str = ""
) -> tuple[str, ...]:
    """The CMake arguments for ``profile`` on a CPU of ``machine`` with ``features``.

    Every instruction set is named, on or off, so nothing depends on ggml's defaults or on
    the machine that builds; ``GGML_NATIVE`` is always off and AMX always off. ``gpu`` adds
    its backend; ``cuda_arch`` names the CUDA architecture to compile for ("90": the GPU
    found; empty: llama.cpp's list of them all, far slower to build).
    """
    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r}; choose one of {', '.join(GPUS)}")
    if profile not in PROFILES:
        raise ValueError(f"unknown CPU profile {profile!r}; choose one of {', '.join(PROFILES)}")
    # LLAVA_BUILD builds libmtmd, llama.cpp's multimodal library: the image (and sound) encoders
    # of models that see, which Floodgate's projector drives (app/engine/projector.py).
    args = ["-DLLAVA_BUILD=ON", "-DGGML_NATIVE=OFF"]
    if machine.lower() in ("x86_64", "amd64", "x64"):
        has = {option for option, needs in _X86_SETS if all(f in features for f in needs)}
        for option, _ in _X86_SETS:
            if profile == "baseline" or "GGML_AVX2" not in has:
                wanted = option == "GGML_SSE42"  # every x86-64 CPU since 2008
            elif profile == "portable":
                wanted = option in _PORTABLE
            else:
                wanted = option in has
            args.append(f"-D{option}={'ON' if wanted else 'OFF'}")
        args.extend(f"-D{option}=OFF" for option in _NEVER)
    # Other architectures (arm64 and the rest): GGML_NATIVE=OFF builds for the architecture's
    # baseline (NEON on arm64), which every CPU of it runs; Apple's builds add Metal on their own.
    if gpu in _MODULAR:
        args += [f"-DGGML_{gpu.upper()}=ON", "-DGGML_BACKEND_DL=ON"]
    if gpu == "cuda" and cuda_arch:
        args.append(f"-DCMAKE_CUDA_ARCHITECTURES={cuda_arch}")
    if gpu == "metal":
        args.append("-DGGML_METAL=ON")
    return tuple(args)


def vulkan_header() -> Path | None:
    """The Vulkan C header the build will compile against, if there is one."""
    roots = [Path(os.environ["VULKAN_SDK"]) / "include"] if os.environ.get("VULKAN_SDK") else []
    roots += [Path("/usr/include"), Path("/usr/local/include")]
    for root in roots:
        header = root / "vulkan" / "vulkan_core.h"
        if header.exists():
            return header
    return None


def patches_for(gpu: str) -> tuple[Path, ...]:
    """The patches this machine's build of ``gpu`` needs (each one only where needed).

    ``backend-modules-cpu.patch``, for a build of backend modules (Vulkan, CUDA): such a build
    registers no backend by itself, so ``import llama_cpp`` loads the CPU module, and every
    use of llama-cpp-python (its server, a script, the tests' references) works as with a
    static build; the GPU module is loaded only by Floodgate, when its driver is known not to
    crash. ``vulkan-layer-settings.patch``: llama.cpp's Vulkan backend configures the
    validation layer with ``VK_EXT_layer_settings``, which Vulkan headers before 1.3.2xx
    (Debian 12 has 1.3.239) do not declare; the patch leaves that configuration out where
    the header lacks it. Newer headers build the sources as they are.
    """
    patches = [PATCHES / "backend-modules-cpu.patch"] if gpu in _MODULAR else []
    header = vulkan_header() if gpu == "vulkan" else None
    if header is not None and "VK_EXT_layer_settings" not in header.read_text(
        encoding="utf-8", errors="replace"
    ):
        patches.append(PATCHES / "vulkan-layer-settings.patch")
    return tuple(patches)


def python_tag() -> str:
    """The interpreter and platform the wheel is built for (its binary ties it to them)."""
    return f"{sys.implementation.name}{sys.version_info.major}{sys.version_info.minor}-" + (
        sysconfig.get_platform()
    )


def plan(
    profile: str,
    machine: str | None = None,
    features: frozenset[str] | None = None,
    gpu: str = "none",
) -> Build:
    """The build of ``profile`` and ``gpu`` for this machine (or ``machine`` with ``features``)."""
    cuda_arch = (gpu_probe.nvidia_compute_capability() or "") if gpu == "cuda" else ""
    args = cmake_args(
        profile,
        platform.machine() if machine is None else machine,
        cpu_features() if features is None else features,
        gpu,
        cuda_arch,
    )
    patches = patches_for(gpu)
    what: dict[str, object] = {"version": VERSION, "cmake_args": args, "python": python_tag()}
    if patches:  # a CPU build's digest stays what it always was
        what["patches"] = [hashlib.sha256(p.read_bytes()).hexdigest() for p in patches]
    key = json.dumps(what)
    return Build(profile, args, hashlib.sha256(key.encode()).hexdigest(), gpu, patches)


def cache_root() -> Path:
    """The folder of Floodgate's built wheels: one subfolder per build digest."""
    override = os.environ.get(CACHE_VARIABLE)
    if override:
        return Path(override)
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "floodgate" / "wheels"


def cached_wheel(build: Build, root: Path) -> Path | None:
    """The wheel built for ``build``, if it was built before."""
    wheels = sorted((root / build.folder_name).glob("llama_cpp_python-*.whl"))
    return wheels[0] if wheels else None


def build_wheel(build: Build, root: Path) -> Path:
    """Build ``build``'s wheel from the sdist (4-15 minutes on 2 cores) into the cache."""
    root.mkdir(parents=True, exist_ok=True)
    print(
        f"Building llama-cpp-python {VERSION} ({build.profile}, GPU {build.gpu}: "
        f"{' '.join(build.cmake_args)}).\n"
        "This takes 4 to 15 minutes on 2 cores (more with a GPU backend), once per set of flags.",
        flush=True,
    )
    env = dict(os.environ, CMAKE_ARGS=" ".join(build.cmake_args), FORCE_CMAKE="1")
    with tempfile.TemporaryDirectory(dir=root, prefix=".building-") as tmp:
        staging = Path(tmp) / build.folder_name
        source = _patched_source(build, Path(tmp)) if build.patches else None
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-cache-dir",  # a cached wheel of other flags must not be reused
                "--no-binary",
                "llama-cpp-python",
                "--wheel-dir",
                str(staging),
                str(source) if source is not None else f"llama-cpp-python=={VERSION}",
            ],
            check=True,
            env=env,
        )
        (staging / "build.json").write_text(
            json.dumps(
                {
                    "profile": build.profile,
                    "gpu": build.gpu,
                    "cmake_args": build.cmake_args,
                    "patches": [p.name for p in build.patches],
                    "python": python_tag(),
                },
                indent=1,
            ),
            encoding="utf-8",
        )
        # Moved into place whole: an interrupted build leaves no half folder to pick up.
        final = root / build.folder_name
        shutil.rmtree(final, ignore_errors=True)
        os.replace(staging, final)
    wheel = cached_wheel(build, root)
    if wheel is None:
        raise SystemExit(f"pip built no llama-cpp-python wheel into {root / build.folder_name}")
    return wheel


def _patched_source(build: Build, work: Path) -> Path:
    """The sdist, unpacked into ``work`` with ``build``'s patches applied; its folder."""
    download = work / "sdist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--dest",
            str(download),
            f"llama-cpp-python=={VERSION}",
        ],
        check=True,
    )
    archive = next(download.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(work / "source", filter="data")
    source = next((work / "source").iterdir())
    for patch in build.patches:
        # git applies a unified diff outside a repository too; it is there: this is a clone.
        subprocess.run(["git", "apply", "--verbose", str(patch)], cwd=source, check=True)
    return source


def unpack(build: Build, root: Path, folder: Path) -> None:
    """Put ``build``'s wheel (built once, then cached) unpacked into ``folder``.

    For a process that must run another build than the venv's: put ``folder`` first on its
    ``PYTHONPATH`` (the tests run the Vulkan build on lavapipe so, beside the CPU build).
    """
    wheel = cached_wheel(build, root) or build_wheel(build, root)
    marker = folder / ".wheel"
    if marker.exists() and marker.read_text(encoding="utf-8") == wheel.name + build.digest:
        return
    shutil.rmtree(folder, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(folder)
    for library in (folder / "llama_cpp" / "lib").glob("*"):
        library.chmod(0o755)  # zip keeps no modes: the loader needs them readable
    marker.write_text(wheel.name + build.digest, encoding="utf-8")


def read_record(venv: Path) -> dict[str, str]:
    """What the venv's record says is installed (empty if nothing was recorded)."""
    try:
        record = json.loads((venv / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def retry_command(gpu: str) -> str:
    """The command that tries the GPU build again."""
    return f"make llama LLAMA_GPU={gpu}"


def build_tools_problem(gpu: str) -> str | None:
    """What this machine lacks to build ``gpu``'s backend (None: nothing), installing it first.

    As root with apt-get (Debian, Ubuntu), the Vulkan headers, glslc and SPIR-V headers are
    installed from the system's packages; elsewhere the sentence says what to install.
    """
    if gpu == "vulkan":
        if vulkan_header() is not None and shutil.which("glslc"):
            return None
        packages = ["libvulkan-dev", "glslc", "spirv-headers"]
        if install_system_packages(packages) and vulkan_header() and shutil.which("glslc"):
            return None
        return (
            "building for Vulkan needs its headers and the glslc shader compiler "
            f"(Debian and Ubuntu: apt-get install {' '.join(packages)})"
        )
    if gpu == "cuda" and gpu_probe.nvcc() is None:
        return "building for CUDA needs CUDA's compiler, nvcc (the CUDA toolkit)"
    return None


def install_system_packages(packages: Sequence[str]) -> bool:
    """Install Debian packages where this process may (root with apt-get); True if done."""
    if not shutil.which("apt-get") or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    command = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]
    if subprocess.run(command, env=env, check=False).returncode == 0:
        return True
    subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
    return subprocess.run(command, env=env, check=False).returncode == 0


def chosen_gpu(asked: str | None, record: dict[str, str]) -> tuple[str, str]:
    """The GPU to build for, and what was asked (to record): ``auto`` is decided here."""
    asked = asked or record.get("asked_gpu") or AUTO
    if asked != AUTO:
        return asked, asked
    found = gpu_probe.detect()
    print(f"GPU for llama.cpp: {found.gpu} ({found.reason}).", flush=True)
    return found.gpu, AUTO


def install(
    profile: str | None,
    venv: Path,
    root: Path,
    dry_run: bool = False,
    gpu: str | None = None,
) -> Build:
    """Make sure the venv has the wheel of ``profile`` and ``gpu`` (default: as recorded).

    The profile defaults to the one recorded, else portable; the GPU to the one asked before,
    else ``auto``. Builds the wheel only when no wheel of the same digest is cached; installs
    it only when the venv's record names another digest. The record is rewritten only on a
    change, so whatever depends on it (the Makefile's self-test) runs again only then. A GPU
    build that cannot be made leaves the CPU build, says why, and records the CPU as asked
    for, so that setup does not try again by itself.
    """
    record = read_record(venv)
    recorded = record.get("profile")
    chosen = profile or (recorded if recorded in PROFILES else DEFAULT_PROFILE)
    target, asked = chosen_gpu(gpu, record)
    build = plan(chosen, gpu=target)
    if dry_run:
        return build
    wheel = cached_wheel(build, root)
    if wheel is None and target != "none":
        problem = build_tools_problem(target)
        # The tools just installed (the Vulkan headers) decide the patches, so the digest.
        build = plan(chosen, gpu=target)
        wheel = cached_wheel(build, root)
        if problem is None and wheel is None:
            try:
                wheel = build_wheel(build, root)
            except (subprocess.CalledProcessError, OSError, StopIteration) as exc:
                problem = f"the build failed ({exc})"
        if problem is not None:
            print(
                f"No {target} build: {problem}. Floodgate runs on the CPU; "
                f"`{retry_command(target)}` tries again.",
                flush=True,
            )
            build, asked, wheel = plan(chosen), "none", None
    wheel = wheel or cached_wheel(build, root) or build_wheel(build, root)
    if record.get("digest") == build.digest and record.get("asked_gpu") == asked:
        return build
    if record.get("digest") != build.digest:
        _pip_install(wheel, build)
    write_record(venv, build, asked, wheel)
    return build


def _pip_install(wheel: Path, build: Build) -> None:
    """Install ``wheel`` (of ``build``) into this interpreter's venv, over the one there."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--force-reinstall",
            str(wheel),
        ],
        check=True,
    )
    print(f"Installed {wheel.name} ({build.profile}, GPU {build.gpu}, {build.folder_name}).")


def write_record(venv: Path, build: Build, asked: str, wheel: Path) -> None:
    """Record in ``venv`` what is installed there (:func:`read_record` reads it)."""
    (venv / RECORD_NAME).write_text(
        json.dumps(
            {
                "profile": build.profile,
                "gpu": build.gpu,
                "asked_gpu": asked,
                "digest": build.digest,
                "wheel": str(wheel),
            },
            indent=1,
        ),
        encoding="utf-8",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m app.install.llama_wheel",
        description="Build (once per set of flags) and install llama-cpp-python for this CPU.",
    )
    parser.add_argument(
        "--cpu",
        choices=PROFILES,
        default=None,
        help="instruction sets: portable (the AVX2 generation), cpu (all of this CPU's, "
        "never AMX) or baseline (any CPU); default: the one installed before, else portable",
    )
    parser.add_argument(
        "--gpu",
        choices=(AUTO, *GPUS),
        default=None,
        help="the GPU backend: auto (the GPU this machine has), vulkan, cuda, metal or none; "
        "default: as asked before, else auto",
    )
    parser.add_argument(
        "--unpack",
        type=Path,
        metavar="FOLDER",
        default=None,
        help="do not install: put the build (--gpu, default vulkan) unpacked into FOLDER, "
        "for a process that puts it on its PYTHONPATH",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the flags and the wheel folder only"
    )
    args = parser.parse_args(argv)
    if args.unpack is not None:
        return _unpack(args.cpu or DEFAULT_PROFILE, args.gpu or "vulkan", args.unpack)
    # The venv is the interpreter's own: the Makefile runs this with .venv/bin/python.
    venv = Path(sys.prefix)
    build = install(args.cpu, venv, cache_root(), args.dry_run, args.gpu)
    if args.dry_run:
        print(f"{build.profile}: {' '.join(build.cmake_args)}\n{cache_root() / build.folder_name}")
    return 0


UNAVAILABLE = "UNAVAILABLE"
"""The file an ``--unpack`` folder holds instead of a build that cannot be made here: why."""


def _unpack(profile: str, gpu: str, folder: Path) -> int:
    """``--unpack``: the build, or a file saying why there is none (never an error)."""
    build = plan(profile, gpu=gpu)
    problem = None
    if cached_wheel(build, cache_root()) is None:
        problem = build_tools_problem(gpu)
        build = plan(profile, gpu=gpu)  # the tools just installed decide the patches
    if problem is None:
        try:
            unpack(build, cache_root(), folder)
            (folder / UNAVAILABLE).unlink(missing_ok=True)
            return 0
        except (subprocess.CalledProcessError, OSError, StopIteration) as exc:
            problem = f"the build failed ({exc})"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / UNAVAILABLE).write_text(f"No {gpu} build: {problem}.\n", encoding="utf-8")
    print(f"No {gpu} build for the tests: {problem}.", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
