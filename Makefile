# Two entry points, each doing its own set-up on a fresh machine:
#   make demo   -- install, then run a bundled example program in code mode
#   make test   -- install, then run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TSLS_VERSION       := 5.1.3
TYPESCRIPT_VERSION := 5.9.3

.PHONY: demo test lint install clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	# The TypeScript language server the lsp tool finds next to the venv's interpreter
	# (tests/tools/test_lsp_typescript.py drives it): from npm, pinned.
	npm install --silent --no-audit --no-fund --prefix $(VENV)/node \
		typescript-language-server@$(TSLS_VERSION) typescript@$(TYPESCRIPT_VERSION)
	ln -sf ../node/node_modules/.bin/typescript-language-server $(BIN)/typescript-language-server
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/codemode run examples/summarize_workspace.py --workspace examples/workspace

test: $(STAMP)
	$(BIN)/python -m pytest

# mypy cannot follow setuptools' editable-install mapping (codemode.engine -> engine/), so
# it checks a tree of symlinks laid out as the installed package.
TYPECHECK := build/typecheck/codemode

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	rm -rf build/typecheck && mkdir -p $(TYPECHECK)
	for f in codemode/*; do ln -s ../../../$$f $(TYPECHECK)/; done
	for d in engine sdk_gen sandbox tools cli integrations bench agent; do ln -s ../../../$$d $(TYPECHECK)/$$d; done
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build
