"""tether: a memory for long-lived LLM agents that survives compaction, restarts and crashes."""

__version__ = "0.1.0"
