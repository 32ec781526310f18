"""Checkpoint compaction: bank the raw window before it is summarised (``bank``)."""

from tether.checkpoint.bank import (
    ALLOW_FILE,
    CORPUS_DIR,
    LINK_PREFIX,
    BankCode,
    BankReport,
    Boundary,
    bank_window,
    ledger,
    ledger_path,
    load_allow_file,
    parse_segment_link,
    read_segment,
    render_window,
    segment_link,
    segment_name,
    window_hash,
)

__all__ = [
    "ALLOW_FILE",
    "CORPUS_DIR",
    "LINK_PREFIX",
    "BankCode",
    "BankReport",
    "Boundary",
    "bank_window",
    "ledger",
    "ledger_path",
    "load_allow_file",
    "parse_segment_link",
    "read_segment",
    "render_window",
    "segment_link",
    "segment_name",
    "window_hash",
]
