"""Pure logic: no I/O, no wall clock. Time, when needed, comes in as a value."""
