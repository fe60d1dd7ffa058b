# One LogBroker node. Data lives in /data (mount a volume); set LOGBROKER_ADMIN_PASSWORD for the
# first admin (auth is on) or LOGBROKER_AUTH=off for development. A cluster node also takes
# LOGBROKER_COORDINATOR=etcd://..., LOGBROKER_ADVERTISED_HOST, the shared LOGBROKER_JWT_SECRET and
# LOGBROKER_CLUSTER_TOKEN, and the RPC certificates (see docker-compose.yml).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LOGBROKER_DATA_DIR=/data \
    LOGBROKER_HTTP_HOST=0.0.0.0 \
    LOGBROKER_HTTP_PORT=8080 \
    LOGBROKER_RPC_PORT=9090 \
    LOGBROKER_GRPC_PORT=9092 \
    LOGBROKER_KAFKA_PORT=9093

WORKDIR /app
COPY setup.cfg pyproject.toml README.md ./
COPY segments ./segments
COPY coordinator ./coordinator
COPY internal_rpc ./internal_rpc
COPY http_api ./http_api
COPY grpc_api ./grpc_api
COPY kafka_api ./kafka_api
COPY logbroker ./logbroker
COPY spark_connector ./spark_connector
# The public gRPC API's modules are generated from grpc_api/broker.proto (not committed). The image
# is a node: the package with its server extra, nothing of the benchmarks, chaos harness or tests.
RUN pip install --no-cache-dir "grpcio-tools>=1.85,<1.86" && python -m grpc_api.stubs \
    && pip install --no-cache-dir ".[server]" \
    && useradd --system --uid 10001 --home-dir /data logbroker \
    && mkdir -p /data && chown logbroker /data

USER logbroker
VOLUME ["/data"]
EXPOSE 8080 9090 9092 9093
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=2)"
ENTRYPOINT ["logbroker", "serve"]
