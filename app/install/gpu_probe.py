"""Which GPU this machine has, for setup: the build to make (standard library only).

Setup builds llama.cpp for a GPU only where one is usable:

- macOS on Apple Silicon: Metal (llama.cpp's default there);
- an NVIDIA GPU that ``nvidia-smi`` lists, with CUDA's compiler (``nvcc``) found: CUDA;
- a Vulkan device that is not a CPU (AMD, Intel, NVIDIA without ``nvcc``): Vulkan. The
  device list comes from the Vulkan loader itself (``libvulkan.so.1``, through ctypes), in a
  child process: a broken driver crashes that child, not setup.

A CPU-type Vulkan device (Mesa's lavapipe) does not count: it is for tests, not for speed.

Run as ``python -m app.install.gpu_probe vulkan`` it prints one line per Vulkan device:
``<type> <name>``, the type as Vulkan names it (``discrete``, ``integrated``, ``virtual``,
``cpu``, ``other``).
"""

from __future__ import annotations

import ctypes
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PROBE_SECONDS = 30.0
"""A Vulkan driver that has not listed its devices by then is not usable."""

_TYPES = ("other", "integrated", "discrete", "virtual", "cpu")
"""VkPhysicalDeviceType, in the enum's order."""

_USABLE = ("integrated", "discrete", "virtual")


@dataclass(frozen=True)
class Found:
    """The GPU setup found: the build to make and why, in words for the person."""

    gpu: str
    """``metal``, ``cuda``, ``vulkan`` or ``none``."""
    reason: str


def nvcc() -> str | None:
    """CUDA's compiler, on the PATH or where CUDA installs it; None if there is none."""
    found = shutil.which("nvcc")
    if found:
        return found
    for candidate in (Path("/usr/local/cuda/bin/nvcc"), Path("/opt/cuda/bin/nvcc")):
        if candidate.exists():
            return str(candidate)
    return None


def nvidia_compute_capability() -> str | None:
    """The first NVIDIA GPU's compute capability as CMake writes it ("90"), or None."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run(
            [smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=PROBE_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split()
    if done.returncode != 0 or not lines:
        return None
    return lines[0].replace(".", "") if lines[0].replace(".", "").isdigit() else None


def vulkan_devices(timeout: float = PROBE_SECONDS) -> list[tuple[str, str]]:
    """The Vulkan devices as (type, name), listed in a child process; [] if none or broken."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "app.install.gpu_probe", "vulkan"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=Path(__file__).resolve().parent.parent.parent,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    devices = []
    for line in done.stdout.splitlines():
        kind, _, name = line.partition(" ")
        if kind in _TYPES:
            devices.append((kind, name))
    return devices


def detect() -> Found:
    """The GPU build this machine should get."""
    if sys.platform == "darwin" and platform.machine().lower() in ("arm64", "aarch64"):
        return Found("metal", "Apple Silicon: Metal")
    capability = nvidia_compute_capability()
    if capability is not None and nvcc() is not None:
        return Found("cuda", f"an NVIDIA GPU (compute capability {capability}) and nvcc")
    usable = [name for kind, name in vulkan_devices() if kind in _USABLE]
    if usable:
        return Found("vulkan", f"a Vulkan GPU: {usable[0]}")
    if capability is not None:
        return Found("none", "an NVIDIA GPU, but neither nvcc nor a Vulkan driver for it")
    return Found("none", "no GPU (no Vulkan device but a CPU one, no NVIDIA GPU, no Apple GPU)")


# -- the child: the Vulkan loader through ctypes -------------------------------------------------


class _InstanceCreateInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_uint32),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.c_void_p),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.c_void_p),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.c_void_p),
    ]


_VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
_PROPERTIES_BYTES = 4096
"""More than VkPhysicalDeviceProperties takes (824 bytes on 64-bit machines)."""
_TYPE_OFFSET = 16
"""deviceType follows four uint32s: apiVersion, driverVersion, vendorID, deviceID."""
_NAME_OFFSET = 20
_NAME_BYTES = 256


def _list_vulkan() -> int:
    """Print each Vulkan device as ``<type> <name>``; 1 if there is no Vulkan loader."""
    for name in ("libvulkan.so.1", "libvulkan.1.dylib", "vulkan-1.dll"):
        try:
            vulkan = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return 1
    info = _InstanceCreateInfo(sType=_VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO)
    instance = ctypes.c_void_p()
    if vulkan.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance)) != 0:
        return 1
    count = ctypes.c_uint32(0)
    vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
    handles = (ctypes.c_void_p * count.value)()
    vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), handles)
    for handle in handles[: count.value]:
        properties = ctypes.create_string_buffer(_PROPERTIES_BYTES)
        vulkan.vkGetPhysicalDeviceProperties(ctypes.c_void_p(handle), properties)
        kind = ctypes.c_uint32.from_buffer(properties, _TYPE_OFFSET).value
        raw_name = properties.raw[_NAME_OFFSET : _NAME_OFFSET + _NAME_BYTES].split(b"\0")[0]
        label = _TYPES[kind] if kind < len(_TYPES) else "other"
        print(label, raw_name.decode("utf-8", "replace"), flush=True)
    vulkan.vkDestroyInstance(instance, None)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["vulkan"]:
        raise SystemExit(_list_vulkan())
    found = detect()
    print(f"{found.gpu}: {found.reason}")
