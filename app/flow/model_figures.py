"""The model's figures for the diagnostics panel: where it runs, its threads, the GPU's memory."""

from __future__ import annotations

from PySide6.QtCore import QObject, Slot

from app.engine import ModelInfo
from app.flow.decode_threads import ThreadReport
from app.flow.metrics import FlowMetrics
from app.flow.model_host import ModelHost
from app.flow.words import say_sentence
from app.flow.worker import GpuMemory


class ModelFigures(QObject):
    """Writes what the model host says about the model into the flow's metrics.

    Lives on the UI thread, as the host does; the diagnostics panel reads the figures.
    """

    def __init__(self, host: ModelHost, metrics: FlowMetrics, parent: QObject | None = None):
        super().__init__(parent)
        self._metrics = metrics
        host.threads_changed.connect(self._on_threads_changed)
        host.device_memory.connect(self._on_device_memory)
        host.model_changed.connect(self._on_model_placed)

    @Slot(ThreadReport)
    def _on_threads_changed(self, report: ThreadReport) -> None:
        self._metrics.threads = say_sentence(report.sentence())

    @Slot(GpuMemory)
    def _on_device_memory(self, memory: GpuMemory) -> None:
        self._metrics.gpu_memory = (memory.used, memory.total)

    @Slot(ModelInfo)
    def _on_model_placed(self, info: ModelInfo) -> None:
        placement = info.placement
        self._metrics.placement = say_sentence(placement.summary()) if placement else ""
        if placement is None or not placement.on_gpu:
            self._metrics.gpu_memory = None
