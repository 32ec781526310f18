"""Bringing other histories into tether: ``tether sessions import`` of a JSONL file
(``jsonl.py``, ``jsonl_file.py``: check, then read by session), of a Claude Code or Codex
transcript (``transcript.py``: only what its sessions lack), and the ledger that makes an
interrupted import resume without repeats (``ledger.py``). Above ``memory``: an import
writes session files, then runs the indexer so recall finds what came in."""
