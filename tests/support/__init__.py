"""Helpers the tests share: the event loop, served models, Hub repositories."""

GPU_TESTS = "FLOODGATE_GPU_TESTS"
"""Set in the process tests/engine/test_gpu.py starts: run tests/engine/gpu/ on the Vulkan build."""
