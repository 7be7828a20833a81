"""View models: plain dataclasses built from the broker's in-memory state by plain functions,
so each page can be unit-tested without HTTP. Nothing here writes (the one admin action,
``transactions.abort_open_transaction``, is explicit)."""
