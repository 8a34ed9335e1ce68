# Pam's image: `fly deploy` builds it (fly.toml), and any container platform can run it. The
# web (gunicorn), `pam worker` and the release command `pam release` all run from it; fly.toml
# names them in [processes]. Dependencies come from uv.lock only, with their hashes checked.
#
#   docker build -t pam .
#   docker run --rm -p 8080:8080 -e DATABASE_URL=... -e OPENAI_API_KEY=... pam     # the web
#   docker run --rm -e DATABASE_URL=... -e OPENAI_API_KEY=... pam pam worker       # a worker

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# The uv that reads uv.lock; the lock's own format is stable across uv releases.
ARG UV_VERSION=0.13.9
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_PROJECT_ENVIRONMENT=/opt/pam \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1
RUN python -m venv /opt/uv && /opt/uv/bin/pip install "uv==${UV_VERSION}"
WORKDIR /src
# Dependencies first, from the lock alone: this layer is rebuilt only when pyproject.toml or
# uv.lock changes, not for every change to Pam's code.
COPY pyproject.toml uv.lock ./
RUN /opt/uv/bin/uv sync --locked --no-install-project --no-editable
# Then Pam itself, as a regular (not editable) install, so the image needs no source tree.
COPY . .
RUN /opt/uv/bin/uv sync --locked --no-editable

FROM ${PYTHON_IMAGE}
RUN useradd --create-home --no-log-init --uid 10001 --user-group pam
COPY --from=build /opt/pam /opt/pam
ENV PATH=/opt/pam/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# By number: platforms that check for a non-root user cannot resolve names in the image.
USER 10001:10001
# The default SQLite file (pam.db) lands here, writable by the pam user.
WORKDIR /home/pam
EXPOSE 8080
# The web, configured in webhooks/gunicorn_config.py: $PORT where the platform sets one (Render,
# Cloud Run, Railway), else 8080 (fly.toml's internal_port), $WEB_CONCURRENCY workers, access
# logs without tokens or queries. Exec form: gunicorn itself gets the platform's SIGTERM.
CMD ["gunicorn", "-c", "python:webhooks.gunicorn_config", "webhooks.app:create_app()"]
