"""Proxy mode: kafkad in front of any Kafka cluster (``kafkad proxy``, issue 22).

Theory of operation. The proxy answers nothing by itself: each client connection is paired
with one upstream connection and its request frames are forwarded as bytes, in order, with
their correlation ids; responses come back the same way (``connection.py``). The proxy reads
only request headers (and a Produce's ``acks``), and decodes a response only when it hands
out broker addresses, which it replaces by its own listeners so that every later connection
also goes through it (``rewrite.py``, ``server.py``). Record batches are never re-encoded.

On that path sit three things kafkad already has for its own broker, now applied to real
clusters: the ``kafkad.fault.injection`` rules (``proxy/fault_injection.py``: errors the proxy
answers without forwarding, delays, drops, drop-after-forwarding, per API and client id,
seeded; plus partitions from one upstream broker for a time), recordings of every frame of a
connection (``record.py``) and their replay as a timeline (``replay.py``).

Invariants: a client gets exactly one response per request that has one, in request order,
with its own correlation id; an upstream that closes, refuses, or stays silent past
``upstream_timeout_s`` while owing an answer closes the client connection (never a hang);
a malformed frame from either side closes that connection only.

TLS toward clients and toward the upstream (``security.py``); SASL passes through unchanged,
SaslHandshake v0's unframed tokens included (``connection.py``). Writes are batched per read,
never delayed (``bench/proxy_latency.py`` measures what the proxy adds).

The transaction view (``txn_view.py``): transactional ids, producer ids and epochs, commits,
aborts, fencing and latency as seen in the traffic, served with ``--http`` as a page, JSON and
Prometheus metrics (``http.py``), labelled as observed traffic, not broker state. Load: the
proxy raises its open-files limit (``server.raise_open_files``) and holds 1,000 client
connections (``compat_tests/test_proxy_load.py``, with the workload checker under faults).
"""
