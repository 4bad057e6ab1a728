# Prism: one image for the web server and the Celery workers (docker-compose.yml runs both).
# Stage 1 builds the browser app; stage 2 is the Python service with the compiler.

FROM node:20-bookworm-slim AS frontend
WORKDIR /src/frontend
COPY frontend/ ./
RUN if [ -f package.json ]; then npm ci --no-audit --no-fund && npm run build; else mkdir -p dist; fi

FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PRISM_VAR_DIR=/data
WORKDIR /app
COPY requirements.txt ./
RUN pip install -r requirements.txt
COPY manage.py pyproject.toml ./
COPY compiler/ compiler/
COPY explorer/ explorer/
COPY --from=frontend /src/frontend/dist/ frontend/dist/
RUN useradd --create-home --uid 1000 prism && mkdir -p /data && chown prism /data
USER prism
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "explorer.asgi:application"]
