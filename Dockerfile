# syntax=docker/dockerfile:1
# Multi-stage: build a virtualenv with the project and its runtime dependencies only
# (no test extras), then copy it into a clean image that runs as a non-root user.
# deploy/compose.yaml runs two replicas of this image behind Caddy; see deploy/README.md.

# Both stages must use the same Python: the virtualenv points at its interpreter.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
# Only what the package build needs: no tests, deploy files, .env or local state
# (.dockerignore keeps those out of the build context as well).
COPY pyproject.toml README.md ./
COPY sharing_server ./sharing_server
COPY share_store ./share_store
COPY pyspark_delta_sharing ./pyspark_delta_sharing
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir .

FROM ${PYTHON_IMAGE}
# A fixed numeric uid/gid, so volume ownership and "runAsNonRoot" checks can rely on it.
RUN groupadd --system --gid 10001 sharing \
    && useradd --system --uid 10001 --gid sharing --no-create-home \
       --home-dir /var/lib/sharing --shell /usr/sbin/nologin sharing \
    && mkdir -p /var/lib/sharing /etc/sharing \
    && chown sharing:sharing /var/lib/sharing
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SHARING_SERVER_HOST=0.0.0.0 \
    SHARING_SERVER_PORT=8080 \
    SHARING_SERVER_DATA_DIR=/var/lib/sharing
USER 10001:10001
WORKDIR /var/lib/sharing
EXPOSE 8080
# Plain HTTP on loopback: TLS is terminated in front of the container (deploy/Caddyfile).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/opt/venv/bin/python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SHARING_SERVER_PORT', '8080'), timeout=2)"]
# hypercorn stops gracefully on SIGTERM, Docker's default stop signal.
ENTRYPOINT ["sharing-server"]
# Settings: mount a TOML file and pass --config (deploy/compose.yaml does), and give
# secrets as SHARING_* environment variables. Without --config the defaults apply:
# a SQLite store and local storage under /var/lib/sharing.
#   docker run ... IMAGE --config /etc/sharing/sharing.toml serve
CMD ["serve"]
