"""The Vulkan build on a real Vulkan driver: Mesa's lavapipe, which runs on the CPU.

Collected only in the process ``tests/engine/test_gpu.py`` starts, with the Vulkan build of
llama-cpp-python first on ``PYTHONPATH`` and ``GGML_VK_VISIBLE_DEVICES=0`` (ggml skips a
CPU-type Vulkan device unless told). lavapipe shows that offloading is right, not fast: on 2
cores it processes about 5 prompt tokens a second and decodes one token in about 1.5 s, so
prompts and replies here are short.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import llama_cpp
import pytest
from pytestqt.qtbot import QtBot

from app.bench.engine_drive import EngineThread, Reply
from app.engine import ChatMessage, EngineOptions, GenerationReport, GenerationSettings, StopSignal
from app.engine.devices import gpu_backend, is_dynamic_build, probe_devices
from app.engine.fit import Why
from app.engine.llama import LlamaBackend, open_llama
from app.flow.session import ChatSession, ModelState
from app.flow.words import say_sentence
from app.ui.dialogs.settings_dialog import SettingsDialog
from app.ui.window.app_dialogs import AppDialogs
from app.ui.window.main_window import MainWindow
from tests.support.loop import Loop, run_until
from tests.support.no_qt import env_without_qt
from tests.support.preferences import Saved

pytestmark = pytest.mark.model

PROJECT = Path(__file__).resolve().parents[3]
T = TypeVar("T")

QUESTION = "What is the capital of France? Answer in one short sentence."
GREEDY = GenerationSettings(temperature=0.0, max_tokens=12)


def options(**changes: object) -> EngineOptions:
    """Small and exact: no prompt cache, a reply's tokens processed again (as a fresh context)."""
    base: dict[str, object] = {"n_ctx": 512, "cache_ram_mb": 0, "reuse_reply_tokens": False}
    return EngineOptions(**{**base, **changes})  # type: ignore[arg-type]


@pytest.fixture
def engine() -> Iterator[EngineThread]:
    """The one thread that opens, drives and closes the engines, as the worker."""
    with EngineThread() as thread:
        yield thread


def reply(backend: LlamaBackend, question: str = QUESTION) -> tuple[str, GenerationReport]:
    report = GenerationReport()
    stream = backend.stream_reply(
        [{"role": "user", "content": question}], GREEDY, StopSignal(), report
    )
    return "".join(stream), report


@pytest.fixture(scope="module")
def model() -> Path:
    path = PROJECT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.is_file()
    return path


def test_this_process_runs_the_vulkan_build_and_lists_lavapipe() -> None:
    assert gpu_backend() == "vulkan"
    assert is_dynamic_build()
    probe = probe_devices()
    assert probe.problem is None
    assert probe.backend == "vulkan"
    assert len(probe.devices) == 1
    device = probe.devices[0]
    assert device.name == "Vulkan0"
    assert "llvmpipe" in device.description
    assert device.total > 0
    assert 0 < device.free <= device.total


def test_every_layer_on_the_gpu_gives_the_cpus_greedy_reply(
    model: Path, engine: EngineThread
) -> None:
    gpu = engine.open(model, options(compute="Vulkan0"))
    on_gpu = engine.call(lambda: reply(gpu)[0])
    engine.close(gpu)
    cpu = engine.open(model, options(compute="cpu"))
    on_cpu = engine.call(lambda: reply(cpu)[0])
    engine.close(cpu)
    placement = gpu.info.placement
    assert placement is not None
    assert placement.device == "Vulkan0"
    assert placement.layers == placement.all_layers == 31  # 30 blocks and the output layer
    assert placement.why is Why.ALL
    assert cpu.info.placement is not None
    assert not cpu.info.placement.on_gpu
    print(f"GPU: {on_gpu!r}\nCPU: {on_cpu!r}")
    assert on_gpu == on_cpu
    assert "Paris" in on_gpu


class DecodeLog:
    """Every ``llama_decode`` and ``llama_synchronize``, timed: the real functions, wrapped.

    The engine looks both up in ``llama_cpp`` when it calls them, so wrapping them there
    sees every call. A call's ``end`` is when the device finished it: its synchronisation's
    end where one followed (prompt chunks), else when the call returned.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[list[float]] = []  # start, end, tokens, code
        decode, synchronize = llama_cpp.llama_decode, llama_cpp.llama_synchronize

        def timed_decode(ctx: object, batch: llama_cpp.llama_batch) -> int:
            started = time.perf_counter()
            code = int(decode(ctx, batch))
            self.calls.append([started, time.perf_counter(), int(batch.n_tokens), code])
            return code

        def timed_synchronize(ctx: object) -> None:
            synchronize(ctx)
            if self.calls:
                self.calls[-1][1] = time.perf_counter()

        monkeypatch.setattr(llama_cpp, "llama_decode", timed_decode)
        monkeypatch.setattr(llama_cpp, "llama_synchronize", timed_synchronize)

    def after(self, moment: float) -> list[list[float]]:
        """The calls that began after ``moment``."""
        return [call for call in self.calls if call[0] > moment]

    def in_flight(self, moment: float) -> list[float]:
        """The call that was computing at ``moment``."""
        return next(call for call in reversed(self.calls) if call[0] <= moment)


def stopped_during(log: DecodeLog, stopped: Reply) -> tuple[float, list[float]]:
    """Stop's latency and the call it waited for, after checking that nothing more began.

    On a GPU the abort callback is seen only where the CPU computes (the token embeddings, at
    the start of each micro-batch), so the call in flight runs to its end; the next one, if
    any began, must end at once, aborted; and the computation ends with the call in flight.
    """
    report, set_at = stopped.report, stopped.stop_set_at
    assert report.compute_ended_at is not None
    assert set_at is not None
    latency = report.compute_ended_at - set_at
    later = log.after(set_at)
    assert len(later) <= 1, later
    for started, ended, _, code in later:
        assert code == 2  # aborted
        assert ended - started < 0.25
    flight = log.in_flight(set_at)
    assert report.compute_ended_at <= max(c[1] for c in [flight, *later]) + 0.25
    return latency, flight


def test_stop_mid_prompt_lands_within_the_chunk_in_flight(
    model: Path, engine: EngineThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    question = [
        ChatMessage(
            role="user",
            content="Summarise this: " + "The river runs to the sea and the sea to the sky. " * 6,
        )
    ]
    backend = engine.open(model, options())
    assert backend.info.placement is not None
    assert backend.info.placement.on_gpu
    log = DecodeLog(monkeypatch)
    third: list[float] = []

    def in_the_third_chunk(report: GenerationReport, _seconds: float) -> bool:
        # Half-way through the third chunk, as long as the second took.
        if len(log.calls) < 3:
            return False
        if not third:
            third.append(time.perf_counter() + (log.calls[1][1] - log.calls[1][0]) / 2)
        return time.perf_counter() >= third[0]

    stopped = engine.reply(backend, question, GREEDY, "", stop_when=in_the_third_chunk)
    report = stopped.report
    assert report.finish == "stopped"
    assert report.prefill_ended_at is None, "the prompt was processed before Stop"
    latency, flight = stopped_during(log, stopped)
    chunks = [(int(c[2]), round(c[1] - c[0], 2)) for c in log.calls]
    print(
        f"prompt chunks (tokens, device s) {chunks}; stop latency {latency:.3f} s "
        f"in a chunk of {int(flight[2])} tokens that took {flight[1] - flight[0]:.3f} s"
    )
    # No chunk more than twice the one before it (the sizer's step), so Stop waits at most
    # about twice what the last chunk seen took.
    sizes = [c[2] for c in log.calls if c[3] == 0]
    assert all(b <= 2 * a for a, b in itertools.pairwise(sizes[:-1])), sizes
    kept = report.prefill_done
    assert 0 < kept < report.prompt_tokens
    # What was processed stays, and the next reply resumes after it.
    again = engine.reply(backend, question, GREEDY, "")
    engine.close(backend)
    assert again.report.cached_tokens >= kept - 1
    assert again.report.finish in ("done", "length")
    assert again.text


def test_stop_mid_reply_lands_within_a_token(
    model: Path, engine: EngineThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = engine.open(model, options())
    log = DecodeLog(monkeypatch)
    third: list[float] = []

    def in_the_fourth_token(report: GenerationReport, _seconds: float) -> bool:
        if report.pieces < 3:
            return False
        if not third:
            third.append(time.perf_counter() + 0.2)
        return time.perf_counter() >= third[0]

    question = [ChatMessage(role="user", content="Count from one to twenty in words.")]
    settings = GenerationSettings(temperature=0.0, max_tokens=40)
    stopped = engine.reply(backend, question, settings, "", stop_when=in_the_fourth_token)
    engine.close(backend)
    report = stopped.report
    assert report.finish == "stopped"
    latency, flight = stopped_during(log, stopped)
    assert flight[2] == 1  # a token of the reply, not the prompt
    starts = [c[0] for c in log.calls if c[2] == 1 and c[0] <= (stopped.stop_set_at or 0)]
    token = max(b - a for a, b in itertools.pairwise(starts))
    print(f"stop latency {latency:.3f} s; a token took up to {token:.3f} s before it")
    assert latency <= 1.5 * token + 0.25


def test_little_gpu_memory_offloads_fewer_layers_and_says_why(
    model: Path, engine: EngineThread
) -> None:
    # About 136 MB for the output layer and the compute buffer, 2.5 MB a block, 211 MB in all.
    backend = engine.open(model, options(gpu_memory_mb=175))
    text = engine.call(lambda: reply(backend)[0])
    engine.close(backend)
    placement = backend.info.placement
    assert placement is not None
    assert placement.why is Why.PARTIAL
    assert 0 < placement.layers < placement.all_layers
    assert placement.need <= 175 * 1024 * 1024
    summary = say_sentence(placement.summary())
    assert f"GPU · {placement.layers} of 31 layers" in summary
    assert f"({31 - placement.layers} on the CPU: too little GPU memory)" in summary
    assert "stay on the CPU" in say_sentence(placement.details())
    assert "Paris" in text


def last_line(script: str, model: Path, **env: str) -> str:
    """The last line ``script`` prints, run with ``model`` in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(model)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        cwd=PROJECT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_a_gpu_load_that_fails_falls_back_to_the_cpu_and_says_so(model: Path) -> None:
    # A real allocation failure in the driver's path: buffers limited to 1 MB, so the
    # context's compute buffer cannot be allocated on the device.
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from app.engine import EngineOptions\n"
        "from app.engine.llama import open_llama\n"
        "from app.flow.words import say_sentence\n"
        "b = open_llama(Path(sys.argv[1]), EngineOptions(n_ctx=512, cache_ram_mb=0))\n"
        "p = b.info.placement\n"
        "print(json.dumps({'on_gpu': p.on_gpu, 'fell_back': p.fell_back, "
        "'note': say_sentence(p.note), 'details': say_sentence(p.details())}))\n"
        "b.close()\n"
    )
    result = json.loads(last_line(script, model, GGML_VK_FORCE_MAX_BUFFER_SIZE=str(1024 * 1024)))
    assert not result["on_gpu"]
    assert result["fell_back"]
    assert result["note"].startswith("Loading 31 layers on the GPU failed")
    assert "the model runs on the CPU" in result["note"]
    assert result["details"] == "On the CPU: loading it on the GPU failed."


def test_cpu_only_starts_no_gpu_driver_in_the_app(model: Path) -> None:
    # In a process of its own: the GPU module is not loaded at all, so nothing can run there.
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from app.engine import EngineOptions\n"
        "from app.engine import devices\n"
        "from app.engine.llama import open_llama\n"
        "b = open_llama(Path(sys.argv[1]), EngineOptions(n_ctx=512, cache_ram_mb=0, "
        "compute='cpu'))\n"
        "print('loaded', sorted(devices._loaded), b.info.placement.on_gpu, "
        "len(b.info.placement.devices))\n"
        "b.close()\n"
    )
    # The child lists the GPU (for Settings); this process loaded the CPU module alone.
    assert last_line(script, model) == "loaded ['cpu'] False 1"


@pytest.fixture
def gpu_window(qtbot: QtBot, loop: Loop) -> Iterator[MainWindow]:
    session = ChatSession(
        open_llama,
        options=options(),
        settings=GenerationSettings(temperature=0.0, max_tokens=200),
    )
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.resize(1100, 700)
    window.show()
    qtbot.waitExposed(window)
    session.open_model(PROJECT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    run_until(loop, lambda: session.state is ModelState.READY, timeout=120)
    yield window
    loop.run_until_complete(session.close())


def test_the_header_and_settings_say_where_the_model_runs(
    gpu_window: MainWindow, qtbot: QtBot, loop: Loop
) -> None:
    window = gpu_window
    facts = window.header.facts.text()
    assert "GPU · 31 of 31 layers" in facts
    assert "llvmpipe" in window.header.facts.toolTip()
    AppDialogs(window, Saved()).open_settings()
    dialog = window.findChild(SettingsDialog)
    assert dialog is not None
    qtbot.waitExposed(dialog)
    choice = dialog.editors["compute"]
    items = [choice.itemText(i) for i in range(choice.count())]  # type: ignore[union-attr]
    assert items[:2] == ["Auto (the GPU, if there is one)", "CPU only"]
    assert any("llvmpipe" in item and "(Vulkan0)" in item for item in items)
    assert "31 of 31 layers" in dialog.placement.text()
    dialog.reject()
    # The diagnostics panel: where it runs and the GPU's memory, as its driver says.
    window.diagnostics_dock.show()
    run_until(loop, lambda: window.session.metrics.gpu_memory is not None, timeout=30)
    window.diagnostics.refresh()
    runs_on = window.diagnostics.values["device"].text()
    assert runs_on.startswith("GPU · 31 of 31 layers")
    assert "GPU memory:" in runs_on
    assert "in use" in runs_on
    # A reply streams from the GPU into the window, and Stop ends it there.
    window.composer.setPlainText("Write a long story about a dragon who learns to bake bread.")
    window.send_button.click()
    run_until(loop, lambda: window.session.metrics.reply.pieces_shown >= 2, timeout=120)
    window.send_button.click()  # Stop
    run_until(loop, lambda: not window.session.generating, timeout=60)
    assert window.session.metrics.stop_latency_ms.last is not None


def test_the_gpu_check_measures_the_gpu_where_qt_is_not_installed(tmp_path: Path) -> None:
    # make gpu-check: the bench's gpu section, on a machine that may have no window (here a
    # PySide6 that fails to import shadows the real one).
    out = tmp_path / "gpu.json"
    done = subprocess.run(
        [sys.executable, "-m", "app.bench.gpu_check", "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=PROJECT,
        env=env_without_qt(tmp_path),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["machine"]["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    section = doc["gpu"]
    assert section["present"]
    assert section["device"] == "Vulkan0"
    assert section["device_type"] == "cpu"  # lavapipe, as the Vulkan loader says
    rates = section["rates"]
    assert [rates[k]["layers"] for k in ("all", "half", "none")] == [31, 15, 0]
    for row in rates.values():
        assert row["prompt_tok_s"] > 0
        assert row["decode_tok_s"] > 0
    assert section["native_decode_tok_s"] > 0
    assert section["native_ratio"] > 0
    assert section["stop_prefill_ms"]["n"] + section["stop_decode_ms"]["n"] >= 2
    fit = section["fit"]
    assert fit["estimate_bytes"] > 0
    assert fit["llama_cpp_allocated_bytes"] > 0
    # On lavapipe the targets get no verdict: it runs on the CPU.
    assert "no verdict: a CPU-type device" in done.stdout
    print(done.stdout[-3000:])
