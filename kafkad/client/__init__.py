"""A small Kafka protocol client on kafkad's own wire codecs (kio message classes, wire/
framing and record batches) over blocking sockets; it speaks to kafkad and Apache Kafka
alike by negotiating versions with ApiVersions. See ``cluster``, ``producing``,
``fetching``."""
