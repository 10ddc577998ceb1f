# Synapse — `make run` serves on 127.0.0.1:8000; `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install system-deps run serve worker test lint fuzz properties bench stop clean typescript \
	bench-1m

# torch goes first, pinned to 2.13.0 (the CPU wheel on our machines); the constraints
# file keeps sentence-transformers from ever pulling a multi-GB CUDA build.
$(STAMP): pyproject.toml requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements/constraints.txt torch==2.13.0
	$(BIN)/python -m pip install --quiet -c requirements/constraints.txt -e '.[dev,multilingual]'
	@if $(BIN)/python -m pip list 2>/dev/null | grep -qi '^nvidia-'; then \
		echo "A CUDA build of torch was installed; Synapse needs the CPU build." >&2; exit 1; fi
	touch $(STAMP)

install: $(STAMP)

# Debian packages the test suite drives: Chromium (browser tests), a PostgreSQL server
# without pgvector (the "pgvector missing" test) and PgBouncer (tests/synapse/
# test_pgbouncer.py). Installed only when missing and root.
system-deps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing="$$missing postgresql"; \
	PATH="$$PATH:/usr/sbin" command -v pgbouncer >/dev/null 2>&1 || missing="$$missing pgbouncer"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		else echo "please install:$$missing" >&2; fi; fi

# The server and the worker share one Prometheus folder, emptied before both start
# (docs/scaling.md, "Metrics"; /metrics answers only with SYNAPSE_METRICS_TOKEN set).
METRICS_DIR ?= $(or $(SYNAPSE_DATA_DIR),.synapse)/prometheus

run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py demo_setup
	@echo "Synapse on http://$(HOST):$(PORT)/  (web UI /ui/, API docs /api/docs/, MCP /mcp)"
	@rm -rf "$(METRICS_DIR)" && mkdir -p "$(METRICS_DIR)"
	@trap 'kill 0' INT TERM EXIT; \
	export PROMETHEUS_MULTIPROC_DIR="$(abspath $(METRICS_DIR))"; \
	$(BIN)/python manage.py embed_worker & \
	SYNAPSE_BIND=$(HOST):$(PORT) $(BIN)/gunicorn -c synapse/gunicorn_conf.py

stop: install
	$(BIN)/python manage.py embedded_db stop

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# The suite runs on TEST_WORKERS processes (pytest-xdist; each worker on a throwaway cluster
# of its own: tests/plugin.py), then the few `serial` tests run alone. It includes the
# TypeScript client's Node tests against a live server
# (tests/synapse_client/test_typescript_client.py: needs Node 20+ and npm).
TEST_WORKERS ?= auto
test: install system-deps
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --maxprocesses 4 --dist loadgroup -m "not serial"
	$(BIN)/python -m pytest -m serial

# The property tests at full size (make test runs 1,500 generated search queries and 200
# sync runs, to keep CI short): 5,000 queries and 500 runs of 20 steps.
properties: install
	SYNAPSE_SEARCH_QUERIES=5000 SYNAPSE_SYNC_EXAMPLES=500 $(BIN)/python -m pytest \
		tests/memories/test_search.py::test_thousands_of_generated_queries_never_get_a_server_error \
		tests/memories/test_sync_properties.py -q

# A longer schemathesis run than CI's (examples per operation and mode; see tests/security).
FUZZ_EXAMPLES ?= 25
fuzz: install
	SYNAPSE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest tests/security/test_fuzz.py \
		tests/security/test_fuzz_oauth.py -q -s

# The TypeScript client alone: install, build, its Node tests (the live ones need
# SYNAPSE_URL and SYNAPSE_MIND_KEY; make test runs them against a server it starts).
typescript:
	cd clients/typescript && npm ci && npm test

# The scale benchmarks (issue 17; bench/results/scale.md): bench/core.py, bench/search.py
# and bench/load.py at each size of BENCH_SIZES, with a tenth of the memories in the
# measured mind (10,000 of 100,000; 100,000 of 1,000,000). Hours on a 2-core machine, and
# heavy on disk (the 1M cluster with its HNSW index): never part of `make test` or CI.
# Each run's reports go to BENCH_OUT/<size>/. A quick check of the target itself:
#   make bench-1m BENCH_SIZES=3000 BENCH_EMBEDDED=100 BENCH_REQUESTS=20 BENCH_QUERIES=10 \
#        BENCH_RATES=2 BENCH_SECONDS=3 BENCH_OUT=/tmp/bench-check
BENCH_SIZES ?= 100000 1000000
BENCH_OUT ?= bench/results/scale
BENCH_EMBEDDED ?= 1000
BENCH_REQUESTS ?= 500
BENCH_QUERIES ?= 200
BENCH_RATES ?= 5,10,20,30,40,60,80
BENCH_SECONDS ?= 20
bench-1m: install
	@set -e; for total in $(BENCH_SIZES); do \
		mind=$$((total / 10)); out="$(BENCH_OUT)/$$total"; mkdir -p "$$out"; \
		echo "== $$total memories, $$mind in the measured mind → $$out"; \
		$(BIN)/python bench/core.py --total $$total --mind $$mind \
			--requests $(BENCH_REQUESTS) --output "$$out/core.md"; \
		$(BIN)/python bench/search.py --total $$total --mind $$mind \
			--embedded $(BENCH_EMBEDDED) --queries $(BENCH_QUERIES) --out "$$out/search.md"; \
		$(BIN)/python bench/load.py --memories $$total --minds 100 \
			--rates $(BENCH_RATES) --seconds $(BENCH_SECONDS) --output "$$out/load.md"; \
	done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .import_linter_cache \
		clients/typescript/node_modules clients/typescript/dist
