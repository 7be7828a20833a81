"""How many transactions the coordinator finished, for the broker's metrics (plain integers
the scrape reads; nothing else depends on them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TxnCounters:
    commits: int = 0  # CompleteCommit durable
    aborts: int = 0  # CompleteAbort durable (timeout aborts included)
    timeout_aborts: int = 0  # aborts the coordinator started past the transaction's timeout

    def completed(self, commit: bool) -> None:
        if commit:
            self.commits += 1
        else:
            self.aborts += 1
