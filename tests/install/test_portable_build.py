"""The llama.cpp build runs wherever it is built or copied, and a build that crashes is told."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import llama_cpp
import pytest

from app.install import llama_wheel
from app.install.llama_wheel import Build, cached_wheel, cmake_args, plan
from app.install.self_test import SAFE_REBUILD, run_child, sentence

PROJECT = Path(__file__).resolve().parents[2]

# A Sapphire Rapids Xeon as /proc/cpuinfo lists it: AVX-512 and AMX.
SAPPHIRE_RAPIDS = frozenset(
    [
        "sse4_2",
        "avx",
        "f16c",
        "fma",
        "bmi2",
        "avx2",
        "avx_vnni",
        "avx512f",
        "avx512cd",
        "avx512vl",
        "avx512dq",
        "avx512bw",
        "avx512vbmi",
        "avx512_vnni",
        "avx512_bf16",
        "amx_tile",
        "amx_int8",
        "amx_bf16",
    ]
)
HASWELL = frozenset(["sse4_2", "avx", "f16c", "fma", "bmi2", "avx2"])


def _on(args: tuple[str, ...]) -> set[str]:
    """The ggml options turned on (libmtmd's LLAVA_BUILD, in every build, is not one)."""
    return {
        a.removeprefix("-D").removesuffix("=ON")
        for a in args
        if a.endswith("=ON") and a.startswith("-DGGML_")
    }


def test_every_build_has_the_multimodal_library_for_models_that_see() -> None:
    for profile in llama_wheel.PROFILES:
        for gpu in llama_wheel.GPUS:
            assert "-DLLAVA_BUILD=ON" in cmake_args(profile, "x86_64", HASWELL, gpu)
    import llama_cpp.mtmd_cpp

    assert llama_cpp.mtmd_cpp.mtmd_default_marker()  # libmtmd is built and loads


def test_the_installed_llama_cpp_was_built_by_floodgate_without_amx() -> None:
    info = llama_cpp.llama_print_system_info().decode()
    assert "AMX" not in info
    record = json.loads((Path(sys.prefix) / llama_wheel.RECORD_NAME).read_text())
    # The wheel installed is the one planned for this machine and the recorded profile.
    assert record["digest"] == plan(record["profile"], gpu=record.get("gpu", "none")).digest
    if record["profile"] != "baseline" and "avx2" in llama_wheel.cpu_features():
        assert "AVX2 = 1" in info


def test_amx_is_never_built_even_on_a_cpu_that_has_it() -> None:
    args = cmake_args("cpu", "x86_64", SAPPHIRE_RAPIDS)
    assert "-DGGML_NATIVE=OFF" in args
    assert {"-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"} <= set(args)
    assert not any("AMX" in flag for flag in _on(args))
    assert {"GGML_AVX2", "GGML_AVX512", "GGML_AVX512_VNNI", "GGML_AVX512_BF16"} <= _on(args)


def test_every_instruction_set_is_named_on_or_off() -> None:
    for profile in llama_wheel.PROFILES:
        for features in (SAPPHIRE_RAPIDS, HASWELL, frozenset()):
            args = cmake_args(profile, "x86_64", features)
            named = {a.removeprefix("-D").split("=")[0] for a in args}
            assert {option for option, _ in llama_wheel._X86_SETS} <= named
    haswell = _on(cmake_args("cpu", "x86_64", HASWELL))
    assert {"GGML_AVX2", "GGML_FMA", "GGML_F16C"} <= haswell
    assert not any(flag.startswith("GGML_AVX512") for flag in haswell)


def test_the_default_build_is_the_avx2_generation_and_runs_on_any_avx2_cpu() -> None:
    avx2 = {"GGML_SSE42", "GGML_AVX", "GGML_F16C", "GGML_FMA", "GGML_BMI2", "GGML_AVX2"}
    assert llama_wheel.DEFAULT_PROFILE == "portable"
    # The same flags whether it is built on a Xeon with AVX-512 and AMX or on a Haswell.
    assert _on(cmake_args("portable", "x86_64", SAPPHIRE_RAPIDS)) == avx2
    assert _on(cmake_args("portable", "x86_64", HASWELL)) == avx2
    # A CPU without AVX2 gets the baseline, which every x86-64 CPU runs.
    assert _on(cmake_args("portable", "x86_64", frozenset({"sse4_2", "avx"}))) == {"GGML_SSE42"}


def test_the_baseline_runs_on_any_x86_64_and_arm64_builds_for_its_baseline() -> None:
    assert _on(cmake_args("baseline", "x86_64", SAPPHIRE_RAPIDS)) == {"GGML_SSE42"}
    arm = cmake_args("portable", "aarch64", frozenset({"asimd", "asimddp"}))
    assert arm == ("-DLLAVA_BUILD=ON", "-DGGML_NATIVE=OFF")
    with pytest.raises(ValueError, match="unknown CPU profile"):
        cmake_args("native", "x86_64", HASWELL)


def test_a_change_of_flags_or_version_is_a_new_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = plan("cpu", "x86_64", SAPPHIRE_RAPIDS)
    assert plan("cpu", "x86_64", SAPPHIRE_RAPIDS) == cpu  # stable
    assert plan("cpu", "x86_64", HASWELL).digest != cpu.digest
    assert plan("portable", "x86_64", SAPPHIRE_RAPIDS).digest != cpu.digest
    assert plan("baseline", "x86_64", SAPPHIRE_RAPIDS).digest != cpu.digest
    # The same flags are the same wheel, whichever profile named them.
    assert plan("portable", "x86_64", HASWELL).digest == plan("cpu", "x86_64", HASWELL).digest
    monkeypatch.setattr(llama_wheel, "VERSION", "0.3.99")
    assert plan("cpu", "x86_64", SAPPHIRE_RAPIDS).digest != cpu.digest


def test_a_wheel_built_for_other_flags_is_never_picked_up(tmp_path: Path) -> None:
    haswell = plan("cpu", "x86_64", HASWELL)
    other = plan("cpu", "x86_64", SAPPHIRE_RAPIDS)
    folder = tmp_path / other.folder_name
    folder.mkdir()
    (folder / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").write_bytes(b"")
    assert cached_wheel(haswell, tmp_path) is None
    assert (
        cached_wheel(other, tmp_path)
        == folder / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    )


def test_the_pinned_version_is_the_one_built() -> None:
    pyproject = (PROJECT / "pyproject.toml").read_text()
    assert f'"llama-cpp-python=={llama_wheel.VERSION}"' in pyproject


def test_install_builds_nothing_when_the_wheel_is_cached_and_installed(tmp_path: Path) -> None:
    build: Build = plan("portable")
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / llama_wheel.RECORD_NAME).write_text(
        json.dumps({"profile": "portable", "digest": build.digest})
    )
    root = tmp_path / "wheels"
    (root / build.folder_name).mkdir(parents=True)
    (root / build.folder_name / "llama_cpp_python-0.3.36-py3-none-any.whl").write_bytes(b"")
    # No pip runs: a build would fail here (no network to the sdist is not needed either).
    assert llama_wheel.install(None, venv, root, gpu="none") == build


def test_a_gpu_build_has_its_backend_as_a_module_beside_the_same_cpu_flags() -> None:
    cpu = cmake_args("portable", "x86_64", HASWELL)
    vulkan = cmake_args("portable", "x86_64", HASWELL, "vulkan")
    assert vulkan[: len(cpu)] == cpu  # the CPU backend is built as for the CPU alone
    assert vulkan[len(cpu) :] == ("-DGGML_VULKAN=ON", "-DGGML_BACKEND_DL=ON")
    cuda = cmake_args("portable", "x86_64", HASWELL, "cuda", "90")
    assert cuda[len(cpu) :] == (
        "-DGGML_CUDA=ON",
        "-DGGML_BACKEND_DL=ON",
        "-DCMAKE_CUDA_ARCHITECTURES=90",
    )
    assert cmake_args("portable", "arm64", frozenset(), "metal")[-1] == "-DGGML_METAL=ON"
    with pytest.raises(ValueError, match="unknown GPU"):
        cmake_args("portable", "x86_64", HASWELL, "opengl")


def test_a_cpu_builds_digest_is_what_it_was_and_a_gpu_build_is_another_wheel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(llama_wheel, "vulkan_header", lambda: None)  # no patch either way
    cpu = plan("portable", "x86_64", HASWELL)
    # The digest of the CPU builds before GPU builds existed: caches keep serving them.
    key = json.dumps(
        {
            "version": llama_wheel.VERSION,
            "cmake_args": cmake_args("portable", "x86_64", HASWELL),
            "python": llama_wheel.python_tag(),
        }
    )
    assert cpu.digest == hashlib.sha256(key.encode()).hexdigest()
    vulkan = plan("portable", "x86_64", HASWELL, gpu="vulkan")
    assert vulkan.digest != cpu.digest
    assert vulkan.folder_name.startswith(f"llama-cpp-python-{llama_wheel.VERSION}-vulkan-")


def test_the_vulkan_patch_is_applied_only_where_the_headers_lack_layer_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    header = tmp_path / "vulkan_core.h"
    monkeypatch.setattr(llama_wheel, "vulkan_header", lambda: header)
    header.write_text("#define VK_HEADER_VERSION 239\n")  # Debian 12's
    old = plan("portable", "x86_64", HASWELL, gpu="vulkan")
    names = ["backend-modules-cpu.patch", "vulkan-layer-settings.patch"]
    assert [p.name for p in old.patches] == names
    header.write_text("#define VK_HEADER_VERSION 275\n#define VK_EXT_layer_settings 1\n")
    new = plan("portable", "x86_64", HASWELL, gpu="vulkan")
    assert [p.name for p in new.patches] == names[:1]  # every module build loads its CPU one
    assert new.digest != old.digest  # the patch is part of the wheel's digest
    assert plan("portable", "x86_64", HASWELL).patches == ()  # the CPU build needs none
    assert [p.name for p in plan("portable", "x86_64", HASWELL, gpu="cuda").patches] == names[:1]
    patch = (llama_wheel.PATCHES / "vulkan-layer-settings.patch").read_text()
    assert "+#ifdef VK_EXT_layer_settings" in patch
    assert patch.count("\n+") < 12  # small: it only leaves the validation settings out


def test_a_gpu_build_that_cannot_be_made_leaves_the_cpu_build_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cpu = plan("portable")
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / llama_wheel.RECORD_NAME).write_text(
        json.dumps({"profile": "portable", "gpu": "none", "digest": cpu.digest})
    )
    root = tmp_path / "wheels"
    (root / cpu.folder_name).mkdir(parents=True)
    (root / cpu.folder_name / "llama_cpp_python-0.3.36-py3-none-any.whl").write_bytes(b"")
    monkeypatch.setattr(llama_wheel, "vulkan_header", lambda: None)
    monkeypatch.setattr(llama_wheel, "install_system_packages", lambda packages: False)
    monkeypatch.setattr(llama_wheel.shutil, "which", lambda name: None)  # no glslc
    assert llama_wheel.install(None, venv, root, gpu="vulkan") == cpu
    said = capsys.readouterr().out
    assert "No vulkan build: building for Vulkan needs its headers and the glslc" in said
    assert "`make llama LLAMA_GPU=vulkan` tries again" in said
    record = json.loads((venv / llama_wheel.RECORD_NAME).read_text())
    assert (record["gpu"], record["asked_gpu"]) == ("none", "none")  # setup asks no more


def test_headers_installed_by_setup_decide_the_patches_of_the_build_that_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh Debian 12 has no Vulkan headers until setup installs them: the build planned
    # before that had no patch, and failed to compile (what a fresh machine showed).
    header = tmp_path / "vulkan_core.h"
    monkeypatch.setattr(llama_wheel, "vulkan_header", lambda: header if header.exists() else None)
    monkeypatch.setattr(llama_wheel.shutil, "which", lambda name: "/usr/bin/glslc")

    def install_packages(packages: list[str]) -> bool:
        header.write_text("#define VK_HEADER_VERSION 239\n")  # Debian 12's
        return True

    monkeypatch.setattr(llama_wheel, "install_system_packages", install_packages)
    built: list[Build] = []

    def build_wheel(build: Build, root: Path) -> Path:
        built.append(build)
        raise subprocess.CalledProcessError(1, "pip wheel")  # the CPU build is kept

    monkeypatch.setattr(llama_wheel, "build_wheel", build_wheel)
    cpu = plan("portable")
    root = tmp_path / "wheels"
    (root / cpu.folder_name).mkdir(parents=True)
    (root / cpu.folder_name / "llama_cpp_python-0.3.36-py3-none-any.whl").write_bytes(b"")
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / llama_wheel.RECORD_NAME).write_text(json.dumps({"digest": cpu.digest}))
    llama_wheel.install(None, venv, root, gpu="vulkan")
    assert [p.name for p in built[0].patches][-1] == "vulkan-layer-settings.patch"
    header.unlink()
    built.clear()
    monkeypatch.setattr(llama_wheel, "cache_root", lambda: root)
    assert llama_wheel.main(["--gpu", "vulkan", "--unpack", str(tmp_path / "unpacked")]) == 0
    assert [p.name for p in built[0].patches][-1] == "vulkan-layer-settings.patch"


def test_a_cpu_type_vulkan_device_is_no_gpu_to_build_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.install import gpu_probe

    # Listed for real where a Vulkan loader exists: lavapipe is a CPU device.
    for kind, _name in gpu_probe.vulkan_devices():
        assert kind in ("other", "integrated", "discrete", "virtual", "cpu")
    monkeypatch.setattr(gpu_probe, "nvidia_compute_capability", lambda: None)
    monkeypatch.setattr(gpu_probe.sys, "platform", "linux")
    monkeypatch.setattr(gpu_probe, "vulkan_devices", lambda: [("cpu", "llvmpipe")])
    assert gpu_probe.detect().gpu == "none"
    monkeypatch.setattr(gpu_probe, "vulkan_devices", lambda: [("discrete", "Radeon RX 7900")])
    found = gpu_probe.detect()
    assert found.gpu == "vulkan"
    assert "Radeon RX 7900" in found.reason


@pytest.mark.model
def test_the_self_test_passes_on_this_build(model_path: Path) -> None:
    outcome = run_child(model_path)
    assert outcome.passed, outcome
    assert outcome.step == "decoding"
    assert "prompt_tokens=" in outcome.result
    said = sentence(outcome, model_path)
    assert said.startswith("Self-test passed")


@pytest.mark.model
def test_a_child_killed_by_sigsegv_is_told_with_the_build_and_the_rebuild(
    model_path: Path,
) -> None:
    def crash_in_prefill(step: str, child: subprocess.Popen[str]) -> None:
        if step.startswith("processing a prompt"):
            child.send_signal(signal.SIGSEGV)

    outcome = run_child(model_path, on_step=crash_in_prefill)
    assert outcome.returncode == -signal.SIGSEGV
    assert not outcome.passed
    said = sentence(outcome, model_path)
    assert "SIGSEGV (segmentation fault)" in said
    assert "while processing a prompt of" in said
    assert model_path.name in said
    assert "AVX" in said or "NEON" in said  # llama.cpp's system info, as the child printed it
    assert said.rstrip().endswith(SAFE_REBUILD)
    assert "Fatal Python error: Segmentation fault" in outcome.errors


@pytest.mark.model
def test_floodgate_self_test_is_a_command(model_path: Path) -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "app", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--self-test" in help_text
    done = subprocess.run(
        [sys.executable, "-m", "app", "--self-test", "--model", str(model_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
        cwd=PROJECT,
    )
    assert done.returncode == 0, done.stderr
    assert "Self-test passed" in done.stdout


def test_a_missing_model_fails_the_self_test_with_its_reason(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.gguf"
    outcome = run_child(missing)
    assert not outcome.passed
    assert outcome.returncode == 1
    said = sentence(outcome, missing)
    assert "while loading the model" in said
    assert "nothing.gguf" in said
