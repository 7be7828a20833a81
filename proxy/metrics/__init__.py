"""Prometheus metrics (``http.render_metrics``) and KIP-714 client telemetry (``telemetry``).

Metric names follow the Prometheus JMX exporter's example rules for Kafka
(prometheus/jmx_exporter ``examples/kafka-2_0_0.yml``, whose generic rules
``kafka-kraft-3_0_0.yml`` repeats; ``lowercaseOutputName: true``), so dashboards built on a
JMX-exported Kafka read kafkad unchanged where Kafka has a metric. Under those rules an MBean
``kafka.server<type=BrokerTopicMetrics, name=BytesInPerSec, topic=t><>Count`` becomes
``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}`` (the ``PerSec`` suffix is cut and
``_total`` added), a Yammer histogram's ``<>Count`` and ``<>NNthPercentile`` attributes become
``..._count`` and the same name with ``quantile="0.NN"``, and a gauge's ``<>Value`` the plain name.

kafkad's own machinery (transactions, groups, the cleaner, client telemetry) has no Kafka MBean
with the same meaning and is named ``kafkad_...``.

Modules: ``requests`` (the per-request counters of the dispatch hook and the per-topic byte
counters: plain integers, no locks, no label strings built per request), ``collectors``
(everything derived from broker state at scrape time), ``http`` (the exposition).
"""
