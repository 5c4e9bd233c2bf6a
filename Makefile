# Two commands on a fresh machine with python3 (>= 3.11) and make:
#   make demo   lower examples/ to PTX and cubin (and run them where a GPU is present)
#   make test   lint, type check, pytest and lit
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck pytest lit gpu-test gpu-sanitize clean

$(STAMP): pyproject.toml requirements.lock setup.py tile_mlir/runtime/_launch.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m tile_mlir.demo

test: lint typecheck pytest lit

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

lit: $(STAMP)
	$(BIN)/lit -sv lit-tests

gpu-test: $(STAMP)
	$(BIN)/pytest -q -m gpu

# compute-sanitizer over a subset of the gpu tier that covers every lowering variant and
# op family (the tests marked `sanitize`): memcheck (out-of-bounds and misaligned
# accesses), racecheck (shared-memory hazards), synccheck (barrier misuse). Each tool
# must report 0 errors; racecheck's warnings pass (it reports the posts of a cluster's
# mailboxes as possible races: it does not follow st.async's ordering through an
# mbarrier; support/mailbox.py). Where the package is on PYTHONPATH rather than installed (the
# lent GPU machines): make gpu-sanitize PYTEST="python3 -m pytest"
# One tool at a time (each run is a few minutes): make gpu-sanitize TOOLS=racecheck
SANITIZER ?= compute-sanitizer
PYTEST ?= $(BIN)/pytest
TOOLS ?= memcheck racecheck synccheck
gpu-sanitize:
	@log=$$(mktemp); for tool in $(TOOLS); do \
	  echo "== $(SANITIZER) --tool $$tool"; \
	  $(SANITIZER) --tool $$tool --error-exitcode 99 --print-limit 20 --target-processes all \
	    $(PYTEST) -q -p no:cacheprovider -m "gpu and sanitize" tests > $$log 2>&1; rc=$$?; \
	  cat $$log; \
	  if [ $$rc = 99 ] && [ $$tool = racecheck ] && \
	     grep -q "RACECHECK SUMMARY: .* (0 errors, [0-9]* warnings)" $$log; then rc=0; fi; \
	  [ $$rc = 0 ] || { rm -f $$log; exit 1; }; \
	done; rm -f $$log

clean:
	rm -rf $(VENV) build *.egg-info lit-tests/Output tile_mlir/runtime/_launch*.so
