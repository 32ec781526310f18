"""The agent's context window: tokens, the memory block, replay, compaction, tiers."""
