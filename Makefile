# The two front-door commands: `make run` and `make test`. Both create .venv when missing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# This machine's pip configuration names local mirrors that may be absent; hide pip's notes about them.
QUIET_PIP := 2>&1 | { grep -v "^WARNING: Location 'file:" || true; }
SHELL := /bin/bash
# Python keeps the compiled form of what it imports (git-ignored __pycache__ folders): with PYTHONDONTWRITEBYTECODE
# set, every kernel and process of a run or of the tests would compile pandas, scipy, matplotlib and lobeval again
# (docs/performance.md).
unexport PYTHONDONTWRITEBYTECODE
.SHELLFLAGS := -o pipefail -c

.PHONY: run test test-fast lock clean-venv

# The install's commands are not echoed (pip's with their filter are noise); what they do is said instead.
$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || { echo "creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "installing the pinned stack (requirements.txt) and lobeval into $(VENV): a few minutes, once"
	@$(BIN)/python -m pip install --quiet --no-compile -r requirements.txt $(QUIET_PIP)
	@$(BIN)/python -m pip install --quiet --no-compile --no-deps --no-build-isolation -e . $(QUIET_PIP)
	@$(BIN)/python -m lobeval.workflow.kernel >/dev/null
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/lobeval run

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist worksteal tests

# The loop while editing: every test that runs no notebook and spawns no process (-m "not slow"), stopping at the
# first failure. `make test` (what CI runs) before each commit.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist worksteal -m "not slow" -x -q tests

lock:
	rm -rf /tmp/lobeval-lock && $(PYTHON) -m venv /tmp/lobeval-lock
	/tmp/lobeval-lock/bin/pip install --quiet . pytest pytest-timeout pytest-xdist playwright hypothesis
	{ echo "# The whole stack, pinned (pip freeze of a clean Python 3.11 install of pyproject.toml + test tools)."; \
	  echo "# Regenerate: make lock"; /tmp/lobeval-lock/bin/pip freeze --all --exclude lobeval --exclude pip; } > requirements.txt

clean-venv:
	rm -rf $(VENV)
