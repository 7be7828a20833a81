# kafkad: a Kafka-compatible broker in Python. Data lives in /data (mount a volume there).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY wire ./wire
COPY proxy ./proxy
COPY coordinator ./coordinator
COPY storage ./storage
COPY pipeline ./pipeline
RUN pip install --no-cache-dir .
EXPOSE 9092
VOLUME ["/data"]
# KAFKAD_ADVERTISE: the host:port clients outside the container use to reach it.
ENV KAFKAD_ADVERTISE=localhost:9092
CMD ["kafkad", "serve", "--listen", "0.0.0.0:9092", "--data-dir", "/data"]
