# syntax=docker/dockerfile:1
# Multi-stage: build a wheel with its dependencies, run it as a non-root user.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY sharing_server ./sharing_server
COPY share_store ./share_store
COPY pyspark_delta_sharing ./pyspark_delta_sharing
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --upgrade pip \
    && /opt/venv/bin/pip install --no-cache-dir .

FROM python:3.11-slim
RUN groupadd --system sharing && useradd --system --gid sharing --home-dir /var/lib/sharing sharing \
    && mkdir -p /var/lib/sharing /etc/sharing && chown sharing:sharing /var/lib/sharing
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SHARING_SERVER_HOST=0.0.0.0 \
    SHARING_SERVER_PORT=8080 \
    SHARING_SERVER_DATA_DIR=/var/lib/sharing
USER sharing
WORKDIR /var/lib/sharing
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"
# Mount a config at /etc/sharing/sharing.toml (secrets through SHARING_* variables).
ENTRYPOINT ["sharing-server"]
CMD ["serve"]
