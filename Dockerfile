# kafkad: a Kafka-compatible broker in Python. Data lives in /data (mount a volume there).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY wire ./wire
COPY proxy ./proxy
COPY coordinator ./coordinator
COPY storage ./storage
COPY pipeline ./pipeline
COPY kafkad ./kafkad
# Runtime dependencies only (no test extras). gcc only for the build: it compiles the record
# scanner (wire/_record_kernel.c), then goes.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir . \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin kafkad \
    && mkdir -p /data && chown kafkad:kafkad /data
# Not root: the broker only needs its data directory.
USER kafkad
EXPOSE 9092 9093
VOLUME ["/data"]
# Two listeners, as in docker-compose.yml: INTERNAL (:9092, advertised kafkad:9092) for other
# containers, HOST (:9093, advertised localhost:9092) for the Docker host with -p 9092:9093.
# The healthcheck asks 127.0.0.1:9092 (INTERNAL). For one listener instead, set
# KAFKAD_LISTENERS= and KAFKAD_ADVERTISED_LISTENERS= empty and use KAFKAD_LISTEN/KAFKAD_ADVERTISE.
ENV KAFKAD_LISTENERS=INTERNAL://0.0.0.0:9092,HOST://0.0.0.0:9093 \
    KAFKAD_ADVERTISED_LISTENERS=INTERNAL://kafkad:9092,HOST://localhost:9092 \
    KAFKAD_LISTENER_SECURITY_PROTOCOL_MAP=INTERNAL:PLAINTEXT,HOST:PLAINTEXT \
    KAFKAD_DATA_DIR=/data \
    KAFKAD_GROUP_INITIAL_REBALANCE_DELAY_MS=0
# Ready when the broker answers an ApiVersions request on its listener.
HEALTHCHECK --interval=5s --timeout=5s --start-period=10s --retries=5 \
    CMD ["kafkad", "healthcheck"]
CMD ["kafkad", "serve"]
