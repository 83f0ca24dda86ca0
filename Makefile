# Two commands a new user runs: `make run` and `make test`. Everything else is set up by them.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MODEL := models/SmolLM2-135M-Instruct.Q4_1.gguf
# Translations: the .ts sources are in git; the compiled .qm files are built here.
TS := $(wildcard app/ui/i18n/*.ts)
QM := $(TS:.ts=.qm)
# llama-cpp-python builds from source (a few minutes on 2 cores) for this CPU's instruction sets,
# named one by one: never -march=native, never AMX (its kernels segfault on some Xeons). The wheel
# is kept in Floodgate's own cache folder under a digest of its flags and version, so a change of
# flags rebuilds and only the first setup with given flags pays (app/install/llama_wheel.py).
# LLAMA_CPU=portable (the AVX2 generation; the default), cpu (all of this CPU's sets) or baseline
# (runs on any CPU); empty: what was chosen before.
LLAMA_CPU ?=
# LLAMA_GPU=auto (the GPU this machine has: Metal on Apple Silicon, CUDA where nvidia-smi and
# nvcc are, Vulkan for any other GPU; the default), vulkan, cuda, metal or none; empty: what
# was asked before. A GPU build that fails leaves the CPU build and says why.
LLAMA_GPU ?=
LLAMA := $(VENV)/floodgate-llama.json
LLAMA_FLAGS = $(if $(LLAMA_CPU),--cpu $(LLAMA_CPU)) $(if $(LLAMA_GPU),--gpu $(LLAMA_GPU))
LLAMA_SOURCES := app/install/llama_wheel.py app/install/gpu_probe.py $(wildcard app/install/patches/*)
# The tests run the Vulkan build on Mesa's lavapipe (a Vulkan driver on the CPU) in processes
# of their own, beside the CPU build: built once per machine, kept in the wheel cache.
GPU_TEST := $(VENV)/llama-vulkan/.ready
# Setup ends with the self-test: the model loaded and a prompt processed in a child process.
SELF_TEST := $(VENV)/.self-tested

.PHONY: run test lint typecheck check bench soak translations clean fonts llama install uninstall \
	app-icon gpu-check window-libs

run: $(SELF_TEST) $(QM) fonts window-libs
	$(BIN)/floodgate --model $(MODEL)

test: $(SELF_TEST) $(QM) fonts $(GPU_TEST)
	QT_QPA_PLATFORM=offscreen $(BIN)/pytest

# Rebuild (or reinstall from the cache) llama.cpp with other flags: make llama LLAMA_CPU=baseline,
# make llama LLAMA_GPU=vulkan
llama: | $(BIN)/python
	$(BIN)/python -m app.install.llama_wheel $(LLAMA_FLAGS)
	touch $(LLAMA)
	$(MAKE) $(SELF_TEST)

# The GPU section of the bench, for a machine with a GPU: builds for it (once) and measures
# decode and prompt speed at 0, half and every layer, Stop, and the fit (no network needed
# once the build is cached). It needs no window: app/bench/gpu_check.py (whose --speculative
# adds the drafts' section on that GPU).
gpu-check: $(SELF_TEST)
	mkdir -p build
	$(BIN)/python -m app.bench.gpu_check --model $(MODEL) --json build/gpu-check.json

lint: $(STAMP)
	$(BIN)/ruff check app tests models
	$(BIN)/ruff format --check app tests models
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

bench: $(SELF_TEST) $(QM)
	mkdir -p build
	QT_QPA_PLATFORM=offscreen $(BIN)/floodgate bench --model $(MODEL) --json build/bench.json

# A soak of random Send/Stop/regenerate/switch/close cycles with the real model (500 by default).
soak: $(SELF_TEST) $(QM)
	mkdir -p build
	QT_QPA_PLATFORM=offscreen $(BIN)/floodgate soak --model $(MODEL) --json build/soak.json

# Optional, after `make run`: a launcher in the desktop's applications menu and a `floodgate`
# command in ~/.local/bin, for this checkout, without root (Linux; elsewhere it says so and
# stops before setting anything up). `make uninstall` removes exactly what it put.
install:
	@$(PYTHON) -m app.install.launcher check
	$(MAKE) $(SELF_TEST) $(QM) fonts window-libs
	$(BIN)/python -m app.install.launcher install

uninstall:
	$(PYTHON) -m app.install.launcher uninstall

# After changing resources/icons/app/floodgate.svg: render its PNG sizes again (committed).
app-icon: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m app.ui.look.app_icon

# Qt opens a window on X11 through its xcb plugin, which needs X libraries that a desktop
# mostly has and a minimal system may not (libxcb-cursor0 since Qt 6.5): without them the app
# cannot start there. What the plugin lacks (ldd) is installed like the font below.
XCB_PACKAGES := libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 \
	libxkbcommon-x11-0 libxcb-randr0 libxcb-shape0 libxcb-xfixes0 libxcb-xkb1 libxcb-sync1 \
	libxcb-shm0 libxcb-util1 libxcb-xinerama0
window-libs: $(STAMP)
	@plugin=$$($(BIN)/python -c "import pathlib, PySide6; \
	  print(pathlib.Path(PySide6.__file__).parent / 'Qt/plugins/platforms/libqxcb.so')"); \
	missing=$$([ "$$(uname -s)" = Linux ] && [ -f "$$plugin" ] \
	  && ldd "$$plugin" 2>/dev/null | awk '/not found/ {print $$1}' | sort -u | tr '\n' ' '); \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(XCB_PACKAGES) \
	    || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	        --no-install-recommends $(XCB_PACKAGES)); \
	  else \
	    echo "Qt needs $$missing to open a window on X11 (Debian, Ubuntu: apt install $(XCB_PACKAGES))."; \
	  fi; \
	fi

# Chinese text needs a CJK font: the interface has a Chinese translation, and a test checks
# that it is used. Installed with the system's packages where we may (root with apt-get).
fonts:
	@if ! fc-list :lang=zh family 2>/dev/null | grep -q .; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fonts-noto-cjk \
	    || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	        --no-install-recommends fonts-noto-cjk); \
	  else \
	    echo "No CJK font found: Chinese text shows as boxes. Install fonts-noto-cjk."; \
	  fi; \
	fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(LLAMA): $(LLAMA_SOURCES) | $(BIN)/python
	$(BIN)/python -m app.install.llama_wheel $(LLAMA_FLAGS)
	touch $@

# lavapipe and the Vulkan loader, for the tests (as root with apt-get; elsewhere the GPU tests
# say what is missing and are skipped).
$(GPU_TEST): $(LLAMA_SOURCES) | $(BIN)/python
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mesa-vulkan-drivers libvulkan1 \
	  || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      mesa-vulkan-drivers libvulkan1); \
	fi
	$(BIN)/python -m app.install.llama_wheel --gpu vulkan --unpack $(VENV)/llama-vulkan
	touch $@

$(STAMP): pyproject.toml $(LLAMA)
	$(BIN)/pip install -e '.[test]'
	touch $@

$(SELF_TEST): $(STAMP) $(MODEL)
	$(BIN)/floodgate --self-test --model $(MODEL)
	touch $@

app/ui/i18n/%.qm: app/ui/i18n/%.ts | $(STAMP)
	$(BIN)/pyside6-lrelease $< -qm $@

# After changing user-visible strings: collect them into the .ts files, then translate the
# new entries (Qt Linguist: $(BIN)/pyside6-linguist app/ui/i18n/floodgate_zh_CN.ts).
translations: $(STAMP)
	$(BIN)/pyside6-lupdate $(sort $(shell find app -name "*.py")) -no-obsolete -locations none -ts $(TS)

$(MODEL): | $(BIN)/python
	$(BIN)/python models/fetch_default_model.py models

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache $(QM)
