# Frontier: `make demo` to try it, `make test` to test it. Both are idempotent;
# the second call skips the install unless pyproject.toml changed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
HOST ?= 127.0.0.1
PORT ?= 8000
# pytest exits 5 when a selection holds no test: not a failure of the suite.
PYTEST = $(PY) -m pytest -p no:cacheprovider
ALLOW_EMPTY = || [ $$? -eq 5 ]

.PHONY: demo test test-unit test-integration test-e2e install migrate bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml clients/python/pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pip install -q -e clients/python  # frontier-tracker (clients/python), for its tests
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

migrate: install
	$(PY) manage.py migrate --noinput -v 0

## Try it: migrate, demo login + examples + a live demo run, serve at http://127.0.0.1:8000
demo: migrate
	$(PY) manage.py demo_setup
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

## Everything: unit (embedded), integration (PostgreSQL + Redis), browser (Chromium)
test: test-unit test-integration test-e2e

test-unit: install
	env -u DATABASE_URL -u REDIS_URL $(PYTEST) tests --ignore=tests/integration --ignore=tests/e2e -q $(ALLOW_EMPTY)

# Uses DATABASE_URL and REDIS_URL from the environment; skips (with the reason)
# when they are not set, and fails instead when CI=true.
test-integration: install
	FRONTIER_QUEUE=frontier-test FRONTIER_CHANNEL_PREFIX=frontier-test $(PYTEST) tests/integration -q $(ALLOW_EMPTY)

test-e2e: install
	env -u DATABASE_URL -u REDIS_URL $(PYTEST) tests/e2e -q $(ALLOW_EMPTY)

bench: install
	for script in bench/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf var test-artifacts
