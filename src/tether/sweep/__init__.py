"""The daily memory sweep: owners, producers, receipts, apply, cursor and the runner.

The rules live in ``tether.core.sweep`` (pure); this package runs them against a
``tether.ports.SweepStore``, one short transaction per step, each step re-reading the
owner's deletion marker, generations and namespace before it writes (fail closed).
"""
