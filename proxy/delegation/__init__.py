"""Delegation tokens (KIP-48): the rules (``tokens``), the durable store and the SCRAM
credentials a token authenticates with (``store``). The APIs are served by
``proxy/handlers/delegation_tokens.py``; SCRAM's ``tokenauth=true`` extension by
``proxy/sasl/mechanisms.py``."""
