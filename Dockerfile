# kafkad: a Kafka-compatible broker in Python. Data lives in /data (mount a volume there).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY wire ./wire
COPY proxy ./proxy
COPY coordinator ./coordinator
COPY storage ./storage
COPY pipeline ./pipeline
# Runtime dependencies only (no test extras). gcc only for the build: it compiles the record
# scanner (wire/_record_kernel.c), then goes.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir . \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin kafkad \
    && mkdir -p /data && chown kafkad:kafkad /data
# Not root: the broker only needs its data directory.
USER kafkad
EXPOSE 9092
VOLUME ["/data"]
# KAFKAD_ADVERTISE: the host:port clients use to reach the broker (it has one listener, so one
# address: localhost:9092 for clients on the Docker host with -p 9092:9092; see docker-compose.yml).
ENV KAFKAD_ADVERTISE=localhost:9092 \
    KAFKAD_LISTEN=0.0.0.0:9092 \
    KAFKAD_DATA_DIR=/data \
    KAFKAD_GROUP_INITIAL_REBALANCE_DELAY_MS=0
# Ready when the broker answers an ApiVersions request on its listener.
HEALTHCHECK --interval=5s --timeout=5s --start-period=10s --retries=5 \
    CMD ["kafkad", "healthcheck"]
CMD ["kafkad", "serve"]
