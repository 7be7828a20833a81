"""A randomized transactional workload against a broker, recorded as a history and checked
for exactly-once anomalies (spec eos.md §6.3, after Jepsen's ``jepsen.tests.kafka`` and
Kafka's transactions system tests).

* ``worker.py``: one worker process (transactional producer, consume-transform-produce copier,
  read_committed reader) of confluent-kafka or kafka-python, writing its history on stdout;
* ``profiles.py``: the profiles (workers, faults, pace) and the fault-injection spec;
* ``runner.py``: the broker, the workers, the faults, the final reads;
* ``final.py``: the bounded final reads;
* ``checker.py``: the pure checker; ``test_checker.py`` proves each anomaly class detectable;
* ``__main__.py``: ``python -m compat_tests.workload`` (see compat_tests/README.md).
"""
