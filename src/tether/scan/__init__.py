"""Detectors that keep secrets out of what tether writes: see ``tether.scan.secrets``."""

from tether.scan.secrets import (
    RULE_IDS,
    RULES,
    Finding,
    RedactedBytes,
    Redaction,
    Rule,
    fingerprint,
    load_allow,
    marker,
    redact,
    redact_bytes,
    scan,
)

__all__ = [
    "RULES",
    "RULE_IDS",
    "Finding",
    "RedactedBytes",
    "Redaction",
    "Rule",
    "fingerprint",
    "load_allow",
    "marker",
    "redact",
    "redact_bytes",
    "scan",
]
