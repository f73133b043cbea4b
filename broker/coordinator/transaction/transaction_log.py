"""The records the transaction coordinator keeps in ``__transaction_state``, byte for byte as Kafka writes them.

Key: TransactionLogKey v0 (the transactional id), value: TransactionLogValue, each behind a 2-byte version
(Kafka's ``MessageUtil.toVersionPrefixedBytes``). The value's version follows the cluster's finalized
``transaction.version``, as Kafka 4.4's ``TransactionVersion.transactionLogValueVersion``: v0 while it is
not finalized (a ZooKeeper-mode Kafka 3.9 has no such feature and writes v0), v1 (flexible) from level 1,
with Kafka 4.4's tagged fields: the client's transaction version (ClientTransactionVersion, so that a
reloaded v2 transaction stays one), PreviousProducerId and NextProducerId (NextProducerEpoch is never set,
as in Kafka). Both versions are read, tags included (Kafka 3.9 reads v1 too and skips the tags). A null
value is the tombstone of an expired transactional id. An Empty transaction is written with null
partitions, the others with their partitions grouped by topic.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from dataclasses import dataclass

from odradek.broker.coordinator.transaction.transaction_metadata import TransactionMetadata, TransactionState, TxnTransitMetadata
from odradek.protocol.messages.coordinator_records import TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE
from odradek.protocol.schema import DecodeError, decode, encode

_VERSION = struct.Struct(">h")
KEY_VERSION = 0


def value_version(transaction_version: int) -> int:
    """The TransactionLogValue version written at a finalized ``transaction.version`` level."""
    return 1 if transaction_version >= 1 else 0


def key_bytes(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + encode(TRANSACTION_LOG_KEY, KEY_VERSION, {"transactional_id": transactional_id})


def value_bytes(target: TxnTransitMetadata, transaction_version: int) -> bytes:
    """``transaction_version``: the cluster's finalized level, which chooses the value's version."""
    if target.state == TransactionState.EMPTY and target.partitions:
        raise ValueError(f"Transaction is not expected to have any partitions since its state is Empty: {target}")
    partitions = None
    if target.state != TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in sorted(target.partitions):
            by_topic[topic].append(index)
        partitions = [{"topic": topic, "partition_ids": ids} for topic, ids in by_topic.items()]
    version = value_version(transaction_version)
    fields = {
        "producer_id": target.producer_id,
        "producer_epoch": target.producer_epoch,
        "transaction_timeout_ms": target.txn_timeout_ms,
        "transaction_status": target.state.value,
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": target.txn_last_update_timestamp,
        "transaction_start_timestamp_ms": target.txn_start_timestamp,
    }
    if version >= 1:
        fields |= {
            "client_transaction_version": target.client_transaction_version,
            "previous_producer_id": target.last_producer_id,
            "next_producer_id": target.next_producer_id,
        }
    return _VERSION.pack(version) + encode(TRANSACTION_LOG_VALUE, version, fields)


@dataclass(frozen=True)
class UnknownKey:
    """A key version this coordinator does not know: skipped when loading, as Kafka does."""

    version: int


def read_key(data: bytes | memoryview) -> str | UnknownKey:
    """The transactional id of a record's key."""
    if len(data) < 2:
        raise DecodeError("transaction log key: no version prefix")
    (version,) = _VERSION.unpack_from(data, 0)
    if version not in TRANSACTION_LOG_KEY.valid:
        return UnknownKey(version)
    key, _ = decode(TRANSACTION_LOG_KEY, version, data, 2, exact=False)
    return key.transactional_id


def read_value(transactional_id: str, data: bytes | memoryview | None) -> TransactionMetadata | None:
    """The metadata a value stores; None for a tombstone. The last producer epoch is not stored; a v0 value
    stores no previous or next producer id and no client transaction version (0: a v1 client's)."""
    if data is None:
        return None
    if len(data) < 2:
        raise DecodeError("transaction log value: no version prefix")
    (version,) = _VERSION.unpack_from(data, 0)
    if version not in TRANSACTION_LOG_VALUE.valid:
        raise DecodeError(f"Unknown version {version} from the transaction log message value")
    value, _ = decode(TRANSACTION_LOG_VALUE, version, data, 2, exact=False)
    try:
        state = TransactionState(value.transaction_status)
    except ValueError:
        raise DecodeError(f"Unknown transaction state id {value.transaction_status} from the transaction status message") from None
    metadata = TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        txn_timeout_ms=value.transaction_timeout_ms,
        state=state,
        txn_last_update_timestamp=value.transaction_last_update_timestamp_ms,
        txn_start_timestamp=value.transaction_start_timestamp_ms,
        last_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        client_transaction_version=value.client_transaction_version,
    )
    if state != TransactionState.EMPTY and value.transaction_partitions is not None:
        for topic in value.transaction_partitions:
            metadata.partitions.update((topic.topic, index) for index in topic.partition_ids)
    return metadata
