# Prism: `make run` sets up and runs the explorer, `make test` runs every test.
.PHONY: run test lint migrate

run:
	scripts/run.sh

test:
	scripts/test.sh $(PYTEST_ARGS)

lint:
	.venv/bin/ruff check .

migrate:
	.venv/bin/python manage.py migrate
