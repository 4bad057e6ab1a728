# Prism: `make run` sets up and runs the explorer, `make test` runs the tests CI runs (all but the
# long sweeps marked `slow`), `make test-all` runs every test.
.PHONY: run test test-all lint migrate events-ts

run:
	scripts/run.sh

test:
	scripts/test.sh -m "not slow" $(PYTEST_ARGS)

# every test, the long sweeps marked `slow` included (pyproject.toml's markers; README "Two commands")
test-all:
	scripts/test.sh $(PYTEST_ARGS)

# The lint gates (also part of make test): ruff, the layer contracts (pyproject.toml), mypy on compiler/
# against its baseline, and the code-shape limits against their allow-list (tests/lint/)
lint:
	bash -c 'source scripts/lib.sh && ensure_venv requirements-dev.txt'  # make run installs only requirements.txt
	.venv/bin/ruff check .
	.venv/bin/lint-imports
	.venv/bin/python -m pytest -q -p no:cacheprovider tests/test_lint.py tests/test_code_shape.py

migrate:
	.venv/bin/python manage.py migrate

# The browser's event types, generated from compiler/events/schema.py (a test checks they are current).
events-ts:
	.venv/bin/python -m compiler.events.typescript > frontend/src/events.generated.ts
