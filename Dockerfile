# kafkad: a Kafka-compatible broker in Python. Data lives in /data (mount a volume there).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY wire ./wire
COPY proxy ./proxy
COPY coordinator ./coordinator
COPY storage ./storage
COPY pipeline ./pipeline
# gcc only for the build: it compiles the record scanner (wire/_record_kernel.c), then goes
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir . \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*
EXPOSE 9092
VOLUME ["/data"]
# KAFKAD_ADVERTISE: the host:port clients outside the container use to reach it.
ENV KAFKAD_ADVERTISE=localhost:9092
CMD ["kafkad", "serve", "--listen", "0.0.0.0:9092", "--data-dir", "/data"]
