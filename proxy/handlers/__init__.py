"""One module per API key; importing this package registers them all."""

from proxy.handlers import (  # noqa: F401
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_producers,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
