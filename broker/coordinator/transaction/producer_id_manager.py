"""Producer ids handed out from blocks claimed for this broker (Kafka's ``RPCProducerIdManager``).

A block of 1,000 ids is unique in the cluster: in ZooKeeper mode it is claimed by a conditional write of
``/latest_producer_id_block`` (retried when another broker wrote in between), a ZooKeeper round trip or
more. Kafka 3.9's brokers ask their controller for it (AllocateProducerIds) without waiting: while no block
is there, an InitProducerId is answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry, and the next
block is asked for once 90% of the current one is handed out, so that it is usually there when needed. The
claim runs on a worker thread here, never on the event loop that serves every client. Where claiming costs
no round trip (the embedded controller's counter) a block is claimed at once, as it is needed.

Every id is handed out on the event loop, so concurrent InitProducerIds get distinct ids, and one claim at
a time is in flight: a block exhausted while the next is being claimed is claimed once.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Coroutine

import anyio.to_thread

from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

PREFETCH_THRESHOLD = 0.90
"""Kafka's ``PidPrefetchThreshold``: the share of a block handed out when the next one is asked for."""
RETRY_BACKOFF_S = 0.05
"""Kafka's ``RetryBackoffMs``: after a failed claim, the next is not started sooner."""
WAITING_FOR_BLOCK = "Producer ID block is full. Waiting for next block"


class ProducerIdManager:
    def __init__(self, claim: Callable[[], range], spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], None] | None) -> None:
        """``claim``: a new block, unique in the cluster. ``spawn``: starts a task on the event loop, in which
        ``claim`` runs on a worker thread; None where ``claim`` needs no round trip and is called at once."""
        self._claim = claim
        self._spawn = spawn
        self._current = range(0)
        self._next_id = 0
        self._next_block: range | None = None
        self._claiming = False
        self._retry_at = 0.0

    def generate(self) -> int:
        """The next producer id; KafkaError COORDINATOR_LOAD_IN_PROGRESS while no block is there (one is
        being claimed)."""
        if self._next_id >= self._current.stop:
            if self._next_block is None:
                if self._spawn is not None:
                    self._request()
                    raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, WAITING_FOR_BLOCK)
                self._next_block = self._claim()
            self._current, self._next_block = self._next_block, None
            self._next_id = self._current.start
        producer_id = self._next_id
        self._next_id += 1
        if self._spawn is not None and producer_id == self._current.start + int(len(self._current) * PREFETCH_THRESHOLD):
            self._request()
        return producer_id

    def _request(self) -> None:
        """Start claiming the next block, unless one is there, being claimed, or the last claim failed less
        than :data:`RETRY_BACKOFF_S` ago."""
        if self._next_block is None and not self._claiming and time.monotonic() >= self._retry_at:
            assert self._spawn is not None
            self._claiming = True
            self._spawn(self._claim_next)

    async def _claim_next(self) -> None:
        try:
            # A broker shutting down does not wait for ZooKeeper: a block claimed meanwhile is never used, as
            # the rest of a block is not when a Kafka broker stops.
            block = await anyio.to_thread.run_sync(self._claim, abandon_on_cancel=True)
        except Exception as exc:  # ZooKeeper unreachable, its session lost: the next InitProducerId tries again
            log.error("Could not claim a producer id block: %r", exc)
            self._retry_at = time.monotonic() + RETRY_BACKOFF_S
        else:
            log.info("Acquired new producerId block %s", block)
            self._next_block = block
        finally:
            self._claiming = False
