"""The transaction coordinator's pure core (issue 5).

``state`` (TxnState, EDGES), ``metadata`` (TxnMetadata, TxnTransit, TxnCache: prepare ->
append -> complete, replay), ``log_format`` (``__transaction_state`` records, ``partition_for``),
``decisions`` (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, verification) and
``lifecycle`` (markers and completion, timeouts, id expiration, startup recovery). No trio, no
clock, no storage: the runtime that appends records and writes markers lives elsewhere.
"""
