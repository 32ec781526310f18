"""Adapters to other harnesses: their transcripts (and, later, their hooks)."""
