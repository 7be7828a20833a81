"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: the per-connection state machine
(``session.py``), the mechanisms (``mechanisms.py``), the listener's settings from Kafka's
configs (``settings.py``) and the SCRAM credential store (``scram_store.py``)."""
