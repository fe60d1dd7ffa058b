# Every target does its own set-up; `make test` is quick when nothing is missing.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
QUICK ?=

.PHONY: test lint bench run system-deps clean

$(STAMP): setup.cfg pyproject.toml
	scripts/bootstrap-venv.sh
	touch $(STAMP)

system-deps:
	scripts/ensure-system-deps.sh

test: $(STAMP) system-deps
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m benchmarks log $(if $(QUICK),--quick,)

run: $(STAMP)
	@test -f logbroker/__main__.py || { echo "make run: the single-node broker (HTTP API) is not built yet; see README Status" >&2; exit 1; }
	$(PY) -m logbroker serve --node-id 1 --http-host 127.0.0.1 --http-port 8080 --coordinator local

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
