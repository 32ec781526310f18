"""The daily sweep's errors and the reason codes they report.

The errors are drawn, with every other error tether raises, in the one tree of
``tether.errors``' docstring.

Reason codes are short fixed strings (``REASONS``): they go to output and telemetry,
never memory text.
"""

from __future__ import annotations

from tether.errors import BadInputError, NotFoundError, TetherError

#: Every reason code the sweep reports; output and telemetry hold only these.
REASONS = frozenset(
    {
        # fencing (re-read inside the transaction)
        "unknown_owner",
        "owner_deleted",
        "account_generation_changed",
        "source_generation_changed",
        "namespace_changed",
        "claim_lost",
        "cursor_moved",
        "pending_receipts",
        "timezone_changed_requires_reconciliation",
        # switches and cohort
        "sweep_disabled",
        "kill_switch",
        "not_in_cohort",
        "cohort_unavailable",
        # dates
        "partial_window",
        "already_complete",
        "out_of_order",
        "per_run_limit",
        # packets and producers
        "incomplete_packet",
        "stage_missing",
        "stage_malformed",
        "stage_conflict",
        "owner_mismatch",
        "stale_generation",
        "window_mismatch",
        "too_many_candidates",
        "too_many_writes",
        "too_many_refs",
        "too_many_sources",
        "content_too_long",
        "bad_content",
        "unknown_source",
        "bad_trigger_condition",
        "forbidden_payload",
        "secret_in_key",
        # receipts
        "busy",
        # the model pass's invocation mark (``sweep.stage``)
        "invocation_busy",
        "invocation_stalled",
        "invocation_taken_over",
        "digest_mismatch",
        # decisions
        "added",
        "amended",
        "repaired",
        "applied_earlier",
        "equal_authority",
        "lower_authority",
        "no_standing_trigger",
        "trigger_inactive",
        "not_standing_trigger",
        "unchanged",
        "source_consumed",
        "committed_earlier",
        "nothing_to_reconcile",
        "reconciled",
    }
)


class SweepError(TetherError):
    """The sweep stopped for an owner; what was committed stays, nothing is half-written."""

    def __init__(self, message: str, reason: str) -> None:
        assert reason in REASONS, reason
        super().__init__(message)
        self.reason = reason


class SweepFencedError(SweepError):
    """A transaction re-read the owner's deletion marker, generations, namespace, the
    receipt's claim or the cursor, found them moved, and wrote nothing (fail closed)."""

    def __init__(self, owner: str, reason: str) -> None:
        super().__init__(f"sweep for owner {owner!r} fenced: {reason}", reason)
        self.owner = owner


class TimezoneChangedError(SweepError):
    """The owner's zone differs from the zone of a completed cursor."""

    runbook = "timezone-changed-requires-reconciliation"

    def __init__(self, owner: str, cursor_zone: str, owner_zone: str) -> None:
        super().__init__(
            f"owner {owner!r} moved from {cursor_zone} to {owner_zone} after a completed "
            f"sweep day; run `tether sweep reconcile {owner}` to continue in {owner_zone}",
            "timezone_changed_requires_reconciliation",
        )
        self.owner = owner
        self.cursor_zone = cursor_zone
        self.owner_zone = owner_zone


class PacketError(SweepError):
    """A DailySweepInput outside its contract; nothing of it was applied."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"sweep packet refused: {reason}{': ' + detail if detail else ''}", reason)


class OwnerExistsError(BadInputError):
    def __init__(self, owner: str, deleted: bool) -> None:
        why = "was deleted (its id is never reused)" if deleted else "already exists"
        super().__init__(f"owner {owner!r} {why}")
        self.owner = owner


class UnknownOwnerError(NotFoundError):
    def __init__(self, owner: str) -> None:
        super().__init__(f"no owner {owner!r} (see `tether owner list`)")
        self.owner = owner


class ConditionError(BadInputError):
    """A trigger condition outside the strict schema; ``reason`` is a reason code."""

    def __init__(self, path: str, problem: str, reason: str = "bad_trigger_condition") -> None:
        super().__init__(f"trigger condition at {path}: {problem}")
        self.path = path
        self.problem = problem
        self.reason = reason
