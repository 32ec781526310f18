"""Memory over a Store: identity (memory.md), notes, pages, the journal, the index, recall."""
