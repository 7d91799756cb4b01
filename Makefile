# Two commands do all the set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DATA   ?= $(abspath ../shared/data)
DEMO_OUT ?= demo-out
# The pins: the Beam jobs (requirements.txt), model/ (extra `model`), tests and benchmarks (extra `dev`).
REQUIREMENTS := requirements.txt requirements-model.txt requirements-dev.txt requirements-spark.txt
# Every transitive dependency at the version CI tested (pip's -c); `make constraints` rewrites it.
CONSTRAINTS := constraints.txt

# The real-data folder and NLTK's punkt model, when they exist here: without them the
# tests that need them skip and say why, and the demo trains a punkt stand-in.
ifneq ($(wildcard $(DATA)/nltk_data),)
export NLTK_DATA ?= $(DATA)/nltk_data
endif
ifneq ($(wildcard $(DATA)),)
export CORPUSFORGE_TEST_DATA ?= $(DATA)
endif
# Bytecode is cached in __pycache__ (git-ignored) even where the environment turns it off
# (PYTHONDONTWRITEBYTECODE): each pytest-xdist worker would otherwise compile the project and
# rewrite the asserts of every test file again, about 7 s of CPU per worker (docs/architecture.md).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast lint constraints install bench clean

$(STAMP): pyproject.toml $(REQUIREMENTS) $(CONSTRAINTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -e '.[model,dev,spark]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/corpusforge demo --out $(DEMO_OUT)

# The whole suite (what CI runs), on every core: pytest-xdist, one worker per core. A test file
# runs on one worker (its module fixtures, a Beam run or a server, built once), and files start
# in the order tests/conftest.py sorts them: slow, then pipeline, then unit tests.
test: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadfile --no-loadscope-reorder

# Unit tests only: no Beam or Spark job, no demo, no CLI subprocess (markers in pyproject.toml).
# A file runs on one worker here too: its module fixtures and the libraries its tests load
# (transformers' model classes, scikit-learn, the language model) are paid once, not once a worker.
test-fast: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadfile --no-loadscope-reorder -m "not pipeline and not slow"

# The habits CI enforces before the tests (configured in pyproject.toml): ruff's F, B, I and UP
# rules on the whole tree, mypy on the engine-free layers (common/, corpus/, dedup/).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# After a change to requirements*.txt and `make install`: the installed set becomes the constraints.
constraints: $(STAMP)
	{ sed -n '/^#/p' $(CONSTRAINTS); $(PY) -m pip freeze --exclude-editable | sed 's/+cpu$$//' | grep -v -i '^corpusforge'; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)

bench: $(STAMP)
	$(PY) benchmarks/read_warc.py
	$(PY) benchmarks/damage.py
	$(PY) benchmarks/c4_throughput.py --beam
	$(PY) benchmarks/c4_scale.py --pages 5000 20000
	$(PY) benchmarks/langid_speed.py
	$(PY) benchmarks/minhash_speed.py
	$(PY) benchmarks/webtext_fetch.py
	$(PY) benchmarks/webtext_memory.py --submissions 150000 300000
	$(PY) benchmarks/extract_quality.py
	$(PY) benchmarks/bloom.py
	$(PY) benchmarks/tokenizer_speed.py
	$(PY) benchmarks/train_step.py
	$(PY) benchmarks/checkpoint_load.py
	$(PY) benchmarks/eval_speed.py
	$(PY) benchmarks/contamination_cost.py

clean:
	rm -rf $(VENV) $(DEMO_OUT) build dist *.egg-info
