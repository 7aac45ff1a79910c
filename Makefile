# Two entry points (README): `make demo` runs the main job, `make test` runs every check.
# Both build their own virtual environment in .venv on first use.
PYTHON ?= python3
# The CPU build of torch on this machine kind; on a GPU host use `make TORCH_SPEC=torch demo`.
TORCH_SPEC ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck unit bench proto proto-check images clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet '$(TORCH_SPEC)'
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/powertrip demo
	$(BIN)/powertrip policies
	$(BIN)/powertrip simulate --preset smoke --out out/smoke

test: lint proto-check typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Regenerate the gRPC code after editing proto/ (and commit it); CI checks it is current.
proto: $(STAMP)
	$(BIN)/python scripts/generate_proto.py

proto-check: $(STAMP)
	$(BIN)/python scripts/generate_proto.py --check

typecheck: $(STAMP)
	$(BIN)/mypy

# pytest exits 5 when it collected nothing; that must fail the build, and say why.
unit: $(STAMP)
	@$(BIN)/pytest || { s=$$?; [ $$s -ne 5 ] || echo "pytest collected no tests" >&2; exit $$s; }

bench: $(STAMP)
	$(BIN)/python benchmarks/selection.py
	$(BIN)/python benchmarks/simulate.py
	$(BIN)/python benchmarks/transfer.py
	$(BIN)/python benchmarks/aggregate_memory.py
	$(BIN)/python benchmarks/job_store.py

# Every Docker image from Debian packages and a local wheelhouse (no registry needed; root).
images: $(STAMP)
	$(BIN)/powertrip deploy images

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
