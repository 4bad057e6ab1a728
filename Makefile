# Prism: `make run` sets up and runs the explorer, `make test` runs every test.
.PHONY: run test lint migrate events-ts

run:
	scripts/run.sh

test:
	scripts/test.sh $(PYTEST_ARGS)

lint:
	.venv/bin/ruff check .

migrate:
	.venv/bin/python manage.py migrate

# The browser's event types, generated from compiler/events/schema.py (a test checks they are current).
events-ts:
	.venv/bin/python -m compiler.events.typescript > frontend/src/events.generated.ts
