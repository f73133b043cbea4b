"""Batches a test built, handed to ``Log.append_as_leader`` as the validator hands a trusted append: the log
takes only a ``ValidationResult``."""

from __future__ import annotations

from odradek.protocol.record_batch import validate_batches
from odradek.storage.log_validator import ValidationResult
from odradek.storage.producer_state import AppendOrigin


def validated(batches: bytes | bytearray, origin: AppendOrigin = AppendOrigin.CLIENT) -> ValidationResult:
    """``batches`` framed and CRC-checked as the validator checks a broker-built append (its records not
    walked), copied once so the log can patch their headers; ``origin`` chooses the producer-state rules
    the log applies."""
    records = bytearray(batches)
    return ValidationResult(records, validate_batches(records, from_client=False).batches, origin)
