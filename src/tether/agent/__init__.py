"""The agent runtime: turns, the tool loop, the busy set and slot gates."""
