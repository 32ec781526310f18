"""The shared fact extractor: one model call with JSON-schema constrained output that
turns source text (a day's spine, a banked segment) into validated, typed candidates with
earned authority. Used by the daily sweep (``tether.sweep``) and the checkpoint harvest."""
