# The two commands a newcomer needs:
#   make demo   - set everything up, build the buggy example and drive a real MCP session against it
#   make test   - set everything up and run the whole test suite
#   make bench  - the performance benchmark against frida-trace and uftrace (installs them)
#   make chaos  - the reliability probes of docs/reliability.md in full (make test runs them in a short form)
VENV := .venv
STAMP := $(VENV)/.bootstrap-stamp

.PHONY: setup demo test bench chaos lint clean wheel

$(STAMP): pyproject.toml scripts/bootstrap.sh
	./scripts/bootstrap.sh
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/python examples/demo.py

test: setup lint
	$(VENV)/bin/python -m pytest

bench: setup
	./scripts/bench-deps.sh
	$(VENV)/bin/python -m bench

chaos: setup
	$(VENV)/bin/python -m chaos

wheel: setup  # dist/strobe-*.whl for `uv tool install` / `pipx install` (setup.py compiles the agent into it)
	$(VENV)/bin/python -m pip wheel --no-deps --no-build-isolation -w dist .

.PHONY: fuzz
fuzz: setup  # every tool fuzzed through a real strobe mcp, thousands of calls (tests/e2e/test_fuzz_tools.py)
	STROBE_FUZZ_EXAMPLES=$${STROBE_FUZZ_EXAMPLES:-500} $(VENV)/bin/python -m pytest tests/e2e/test_fuzz_tools.py -s -o timeout=0

lint: setup
	$(VENV)/bin/ruff check src tests examples bench chaos
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build dist examples/build .pytest_cache .mypy_cache .ruff_cache
