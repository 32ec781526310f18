"""Other harnesses' context windows: turns, parts and digests of a checkpoint."""
