"""Client quotas (KIP-546): the entities and their values (``model``), kept durably
(``store``), in the iteration orders Kafka's Java maps give them (``javamap``)."""
