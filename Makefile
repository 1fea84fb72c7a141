# `make test` is the one command CI runs (through .ci/run): it installs what the
# tests need, builds or reuses the llama.cpp engine, starts the test services and
# runs pytest. Each step is idempotent, so a developer can run it again and again.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
PYTEST_ARGS ?=

.PHONY: install test-deps engine services test bench

install:
	$(PIP) install -q -e .

test-deps:
	$(PIP) install -q -e '.[test,postgres,ray,vouch]'

# The build needs cmake, ninja and g++ (present on a fresh machine of the CI's kind);
# install them only when missing and only where apt-get can.
engine: test-deps
	@command -v cmake >/dev/null && command -v ninja >/dev/null && command -v g++ >/dev/null || \
	  { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	    apt-get install -y -q cmake ninja-build g++ >/dev/null; } || true
	$(PYTHON) -m benchwarden engine build

services:
	bash scripts/test-services.sh start

# The PostgreSQL that `services` started for this checkout is stopped afterwards,
# whatever pytest's result.
test: test-deps engine services
	@. ./.test-services.env 2>/dev/null; \
	$(PYTHON) -m pytest $(PYTEST_ARGS); rc=$$?; \
	bash scripts/test-services.sh stop; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: the test tree is missing or everything was deselected" >&2; exit 1; fi; \
	exit $$rc

# Every bench script (bench/README.md), figures merged into $(BENCH_JSON).
BENCH_JSON ?= bench-figures.json
bench: test-deps engine
	$(PYTHON) bench/run.py --json $(BENCH_JSON)
