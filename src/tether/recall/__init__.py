"""Recall over a home, as ``tether memory recall`` and ``memory reindex`` run it: the
catch-up before a search (banked windows into their sessions, then the index pass), the
search, and each hit's banked window."""
