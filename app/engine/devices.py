"""The compute devices llama.cpp sees (ggml's device list), and loading the GPU backend safely.

llama-cpp-python 0.3.36 binds none of ggml's device functions (its ``llama_cpp/_ggml.py``
loads libggml and declares nothing), so they are declared here with ctypes from
``ggml-backend.h``.

Floodgate's GPU builds (``app/install/llama_wheel.py``) are *dynamic*: built with
``GGML_BACKEND_DL``, each backend is a module of its own (``libggml-cpu.so``,
``libggml-vulkan.so``, ``libggml-cuda.so``) that must be loaded before a model opens. The CPU
builds and the Metal build are *static*: their backends are registered when llama.cpp is first
used, and nothing here loads anything.

A GPU driver runs inside the process that initialises it, and a broken one can crash that
process. So the app first lists the devices in a child process (:func:`probe_devices`, which
runs :func:`main`), and loads the GPU module into its own process only after
the child came back with a list. A build without a GPU module spawns nothing.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.sentence import QT_TRANSLATE_NOOP, Sentence

log = logging.getLogger(__name__)

GPU_BACKENDS = ("cuda", "hip", "vulkan", "sycl", "opencl", "musa", "metal")
"""ggml's GPU backend modules, by the name in their file (``libggml-<name>.so``)."""

PROBE_SECONDS = 60.0
"""How long the child that lists the devices may take (a driver's first start compiles and
caches; lavapipe on 2 cores takes about a second)."""

# enum ggml_backend_dev_type
_TYPE_CPU, _TYPE_GPU, _TYPE_IGPU, _TYPE_ACCEL, _TYPE_META = range(5)


@dataclass(frozen=True)
class ComputeDevice:
    """A GPU as llama.cpp sees it.

    Attributes:
        index: its place in the list llama.cpp offloads to (``main_gpu`` of a single-GPU
            load): discrete GPUs in ggml's order, integrated ones only when there is none.
        name: ggml's name for it ("Vulkan0", "CUDA0"): stable while the hardware is.
        description: the product's name ("NVIDIA GeForce RTX 4090").
        integrated: an integrated GPU (it shares the system's memory).
        free: bytes of its memory free when it was listed.
        total: bytes of its memory.
    """

    index: int
    name: str
    description: str
    integrated: bool
    free: int
    total: int

    @property
    def backend(self) -> str:
        """The backend's name as people say it: "Vulkan", "CUDA", "Metal"."""
        return self.name.rstrip("0123456789") or self.name


@dataclass(frozen=True)
class DeviceProbe:
    """What the child that listed the devices found.

    Attributes:
        devices: the GPUs, in llama.cpp's order (empty: none, or the build has no GPU).
        problem: why the GPU cannot be used (the driver crashed or hung), for the user.
        backend: the GPU backend of this build (``""``: a CPU build).
    """

    devices: tuple[ComputeDevice, ...] = ()
    problem: Sentence | None = None
    backend: str = ""


class _Caps(ctypes.Structure):
    _fields_ = [
        ("async_", ctypes.c_bool),
        ("host_buffer", ctypes.c_bool),
        ("buffer_from_host_ptr", ctypes.c_bool),
        ("events", ctypes.c_bool),
        ("mmap_support", ctypes.c_bool),
    ]


class _Props(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("description", ctypes.c_char_p),
        ("memory_free", ctypes.c_size_t),
        ("memory_total", ctypes.c_size_t),
        ("type", ctypes.c_int),
        ("device_id", ctypes.c_char_p),
        ("caps", _Caps),
    ]


_lock = threading.Lock()
_declared: ctypes.CDLL | None = None
_loaded: set[str] = set()


def library_folder() -> Path:
    """The folder of llama-cpp-python's shared libraries (``llama_cpp/lib``)."""
    import llama_cpp

    return Path(llama_cpp.__file__).parent / "lib"


def _module_path(name: str, folder: Path) -> Path | None:
    for candidate in (f"libggml-{name}.so", f"libggml-{name}.dylib", f"ggml-{name}.dll"):
        if (folder / candidate).exists():
            return folder / candidate
    return None


def _ggml() -> ctypes.CDLL:
    """libggml, with the prototypes of the device functions declared once."""
    global _declared
    if _declared is not None:
        return _declared
    from llama_cpp import llama_cpp as bindings

    # Through libllama's handle, not llama_cpp/_ggml.py's: a wheel cannot hold symbolic links,
    # so libggml.so (which _ggml.py loads) and libggml.so.0 (which libllama needs) are two
    # copies of the library, each with a registry of its own. dlsym on libllama's handle
    # finds the functions of the copy llama.cpp itself uses.
    lib: ctypes.CDLL = bindings._lib
    void_p, size_t = ctypes.c_void_p, ctypes.c_size_t
    prototypes: dict[str, tuple[Any, list[Any]]] = {
        "ggml_backend_reg_count": (size_t, []),
        "ggml_backend_dev_count": (size_t, []),
        "ggml_backend_dev_get": (void_p, [size_t]),
        "ggml_backend_dev_by_name": (void_p, [ctypes.c_char_p]),
        "ggml_backend_dev_name": (ctypes.c_char_p, [void_p]),
        "ggml_backend_dev_description": (ctypes.c_char_p, [void_p]),
        "ggml_backend_dev_type": (ctypes.c_int, [void_p]),
        "ggml_backend_dev_memory": (None, [void_p, ctypes.POINTER(size_t), ctypes.POINTER(size_t)]),
        "ggml_backend_dev_get_props": (None, [void_p, ctypes.POINTER(_Props)]),
        "ggml_backend_dev_backend_reg": (void_p, [void_p]),
        "ggml_backend_load": (void_p, [ctypes.c_char_p]),
    }
    for name, (restype, argtypes) in prototypes.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    _declared = lib
    return lib


def is_dynamic_build(folder: Path | None = None) -> bool:
    """Whether llama.cpp was built with its backends as modules (``GGML_BACKEND_DL``).

    A module exports ``ggml_backend_init``; the CPU library of a static build does not.
    """
    folder = folder or library_folder()
    cpu = _module_path("cpu", folder)
    if cpu is None:
        return False
    try:
        return hasattr(ctypes.CDLL(str(cpu)), "ggml_backend_init")
    except OSError:
        return False


def gpu_backend(folder: Path | None = None) -> str:
    """The GPU backend this build has ("vulkan", "cuda", "metal"…; ``""``: none)."""
    folder = folder or library_folder()
    for name in GPU_BACKENDS:
        if _module_path(name, folder) is not None:
            return name
    return ""


def load_backends(*, gpu: bool) -> None:
    """Make llama.cpp's backends ready to open a model in this process.

    A static build needs nothing. A dynamic one gets its CPU module, and its GPU module when
    ``gpu`` is true (only after :func:`probe_devices` listed the devices without a crash).
    Loading twice does nothing.
    """
    folder = library_folder()
    with _lock:
        if not is_dynamic_build(folder):
            return
        wanted = ["cpu"] + ([gpu_backend(folder)] if gpu and gpu_backend(folder) else [])
        lib = _ggml()
        for name in wanted:
            if name in _loaded:
                continue
            path = _module_path(name, folder)
            if path is None or not lib.ggml_backend_load(os.fsencode(path)):
                log.warning("llama.cpp's %s backend could not be loaded from %s", name, folder)
                continue
            _loaded.add(name)


def list_devices() -> tuple[ComputeDevice, ...]:
    """The GPUs llama.cpp would offload to, in its order, with their memory now.

    The same choice as llama.cpp's model loader: discrete GPUs (one per PCI id), and
    integrated ones only when there is no discrete GPU. Backends must be loaded first.
    """
    lib = _ggml()
    gpus: list[tuple[Any, bool]] = []
    igpus: list[tuple[Any, bool]] = []
    seen_ids: set[bytes] = set()
    for i in range(lib.ggml_backend_dev_count()):
        device = lib.ggml_backend_dev_get(i)
        kind = lib.ggml_backend_dev_type(device)
        props = _Props()
        lib.ggml_backend_dev_get_props(device, ctypes.byref(props))
        if kind == _TYPE_GPU:
            if props.device_id and props.device_id in seen_ids:
                continue
            if props.device_id:
                seen_ids.add(props.device_id)
            gpus.append((device, False))
        elif kind == _TYPE_IGPU:
            # As llama.cpp: integrated GPUs of one backend only.
            same = not igpus or lib.ggml_backend_dev_backend_reg(
                device
            ) == lib.ggml_backend_dev_backend_reg(igpus[-1][0])
            if same:
                igpus.append((device, True))
    chosen = gpus or igpus
    devices = []
    for index, (device, integrated) in enumerate(chosen):
        free, total = _memory(lib, device)
        devices.append(
            ComputeDevice(
                index=index,
                name=_text(lib.ggml_backend_dev_name(device)),
                description=_text(lib.ggml_backend_dev_description(device)),
                integrated=integrated,
                free=free,
                total=total,
            )
        )
    return tuple(devices)


def device_memory(name: str) -> tuple[int, int] | None:
    """(free, total) bytes of the device named ``name`` now; None if it is not loaded."""
    if _declared is None:
        return None
    lib = _ggml()
    device = lib.ggml_backend_dev_by_name(name.encode())
    if not device:
        return None
    return _memory(lib, device)


def _memory(lib: ctypes.CDLL, device: Any) -> tuple[int, int]:
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    lib.ggml_backend_dev_memory(device, ctypes.byref(free), ctypes.byref(total))
    return int(free.value), int(total.value)


def _text(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


# -- the child process ------------------------------------------------------------------------


def probe_devices(timeout: float = PROBE_SECONDS) -> DeviceProbe:
    """List the GPUs in a child process, so that a broken driver crashes the child, not us.

    A build without a GPU module lists nothing and starts no child. Blocks up to
    ``timeout`` seconds: call it off the UI thread (the worker does, before its first load).
    """
    backend = gpu_backend()
    if not backend:
        return DeviceProbe()
    # Not ``-m app.engine.devices``: the package imports this module before runpy runs it.
    command = [
        sys.executable,
        "-c",
        "import sys; from app.engine.devices import main; sys.exit(main())",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return DeviceProbe(
            problem=Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "The GPU driver did not answer within {seconds} s while Floodgate "
                    "listed the devices, so models run on the CPU.",
                ),
                {"seconds": f"{timeout:.0f}"},
            ),
            backend=backend,
        )
    except OSError as exc:
        return DeviceProbe(problem=_probe_failed(str(exc)), backend=backend)
    if done.returncode != 0:
        if done.returncode < 0:
            reason = _signal_name(-done.returncode)
        else:
            reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        log.warning("Listing the GPUs failed (%s): %s", reason, done.stderr[-2000:])
        return DeviceProbe(problem=_probe_failed(reason), backend=backend)
    try:
        rows = json.loads(done.stdout.strip().splitlines()[-1])
        devices = tuple(ComputeDevice(**row) for row in rows)
    except (ValueError, TypeError, IndexError) as exc:
        return DeviceProbe(problem=_probe_failed(f"unreadable answer: {exc}"), backend=backend)
    return DeviceProbe(devices, None, backend)


def _probe_failed(reason: str) -> Sentence:
    return Sentence(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "The GPU driver failed while Floodgate listed the devices ({reason}), so models "
            "run on the CPU. Updating the GPU driver may help.",
        ),
        {"reason": reason},
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def main() -> int:
    """The child: load every backend, print the GPUs as one line of JSON."""
    load_backends(gpu=True)
    print(json.dumps([asdict(device) for device in list_devices()]), flush=True)
    return 0
