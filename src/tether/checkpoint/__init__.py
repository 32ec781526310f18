"""Checkpoint compaction: bank the raw window before it is summarised (``bank``)."""

from tether.checkpoint.bank import (
    CORPUS_DIR,
    LINK_PREFIX,
    BankCode,
    BankReport,
    Boundary,
    bank_window,
    ledger,
    ledger_path,
    parse_segment_link,
    read_segment,
    render_window,
    segment_link,
    segment_name,
    window_hash,
)

__all__ = [
    "CORPUS_DIR",
    "LINK_PREFIX",
    "BankCode",
    "BankReport",
    "Boundary",
    "bank_window",
    "ledger",
    "ledger_path",
    "parse_segment_link",
    "read_segment",
    "render_window",
    "segment_link",
    "segment_name",
    "window_hash",
]
