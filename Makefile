# Prism: `make run` sets up and runs the explorer, `make test` runs every test.
.PHONY: run test lint migrate events-ts

run:
	scripts/run.sh

test:
	scripts/test.sh $(PYTEST_ARGS)

# The same gates tests/test_lint.py runs: ruff, the layer contracts (pyproject.toml), mypy on compiler/
lint:
	.venv/bin/ruff check .
	.venv/bin/lint-imports
	.venv/bin/mypy

migrate:
	.venv/bin/python manage.py migrate

# The browser's event types, generated from compiler/events/schema.py (a test checks they are current).
events-ts:
	.venv/bin/python -m compiler.events.typescript > frontend/src/events.generated.ts
