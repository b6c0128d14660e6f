# `make repro` and `make test` set everything up on a fresh machine (Python >= 3.10).
# TORCH is the pip requirement used for PyTorch (one requirement, e.g. torch>=2.6); CI pins
# TORCH=torch==2.13.0. TORCH_INDEX is the wheel index it comes
# from: `make TORCH_INDEX=cpu` takes PyTorch's CPU-only build (no CUDA wheels: for a machine
# without an NVIDIA GPU on Linux, where the default wheel is the CUDA build); any other value is
# an index URL (e.g. https://download.pytorch.org/whl/cu126); empty, PyPI's default wheel.
PYTHON ?= python3
TORCH ?= torch
TORCH_INDEX ?=
TORCH_INDEX_URL = $(if $(filter cpu,$(TORCH_INDEX)),https://download.pytorch.org/whl/cpu,$(TORCH_INDEX))
# runs trained side by side by `make repro` (python -m nlpzoo repro; 1 = plain `dvc repro`);
# empty: the cores it may use. GPU_SLOTS: runs sharing one GPU (empty: 2)
JOBS ?=
GPU_SLOTS ?=
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: install repro tour test lint dashboard dashboard-screenshots clean pipeline screenshot

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)" $(if $(TORCH_INDEX_URL),--index-url "$(TORCH_INDEX_URL)")
	$(BIN)/python -m pip install --quiet -e .
	touch $(STAMP)

# the tests' and the linter's packages (the extra `test`), on top of the pipeline's
$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(TEST_STAMP)

install: $(STAMP)

repro: $(STAMP)
	test -d .dvc || $(BIN)/dvc init --quiet
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m nlpzoo repro \
		$(if $(JOBS),--jobs $(JOBS)) $(if $(GPU_SLOTS),--gpu-slots $(GPU_SLOTS))

# every enabled run at a small size in tour/ (its own DVC project and mlflow.db), about five
# minutes on two free cores (docs/benchmarks.md, "The tour"): tour/reports/index.html
tour: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m nlpzoo tour

test: $(TEST_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

lint: $(TEST_STAMP)
	$(BIN)/ruff check src stages tests benchmarks
	$(BIN)/ruff format --check src stages tests benchmarks

# MLflow's UI opens on its overview; the URL printed first opens the experiment's runs in the
# "Model training" view (nlpzoo.tracking.experiment_url)
# (PORT: its port; STORE: the MLflow database, e.g. STORE=$(CURDIR)/tour/mlflow.db EXPERIMENT=nlpzoo-tour)
EXPERIMENT ?= nlpzoo
PORT ?= 5000
STORE ?= $(CURDIR)/mlflow.db
RUNS_PAGE := from nlpzoo.tracking import experiment_url as u; \
	print("open", u("http://127.0.0.1:$(PORT)", "$(EXPERIMENT)", "sqlite:///$(STORE)"))
dashboard: $(STAMP)
	@$(BIN)/python -c '$(RUNS_PAGE)'
	$(BIN)/mlflow ui --backend-store-uri "sqlite:///$(STORE)" --host 127.0.0.1 --port $(PORT)

# the MLflow store goes with the outputs: registry/ and models/ name its runs and versions, and
# the next repro trains, evaluates and registers every run again (never from DVC's run cache)
clean:
	@echo "make clean: deletes data models checkpoints eval metrics plots reports registry and the MLflow store (mlflow.db, mlruns); keeps DVC's cache (.dvc/cache: the data stages come back from it), timings/ and .venv"
	@rm -rf data models checkpoints eval metrics plots reports registry mlflow.db mlflow.db-register-lock mlruns

pipeline: $(STAMP)
	$(BIN)/python -m nlpzoo pipeline

# docs/report.png, the README's picture of reports/index.html (needs a headless Chromium)
CHROMIUM ?= chromium
screenshot:
	$(CHROMIUM) --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1500 \
		--screenshot="$(CURDIR)/docs/report.png" "file://$(CURDIR)/reports/index.html"

# docs/dashboard.png and docs/models.png: the MLflow dashboard of mlflow.db (the experiment's
# runs, the registered models), taken by a headless Chromium from `mlflow ui` on a free port
dashboard-screenshots: $(STAMP)
	$(BIN)/python benchmarks/dashboard_screenshots.py --store "$(CURDIR)/mlflow.db" \
		--experiment "$(EXPERIMENT)" --out "$(CURDIR)/docs" --chromium "$(CHROMIUM)"
