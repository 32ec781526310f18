"""Who holds an owner-day's model invocation, and whether it may be taken over.

The ``invoked`` mark (``sweep.stage``) names its holder: the machine, the process id and
that process's start (the boot id and the start tick of ``/proc/<pid>/stat``, so a pid
the kernel reused for another program is not taken for the holder), with a lease on the
stages' clock (the wall clock for a home's files, the server's for PostgreSQL). The
holder renews the lease before each model request, for longer than that request may run
(``[llm] timeout_s``, enforced around the whole call, plus a margin).

A mark is taken over only when both hold:

- its lease has run out, so no request the holder sent can still be running; and
- on this machine, the holder's process is gone (or is this very process, which is not
  in that invocation any more: it asks only between invocations). A holder on another
  machine cannot be looked at: its lease decides alone.

A holder whose lease ran out but whose process still runs here is ``stalled``: never
taken over (it may still send a request); ``tether sweep status`` names it.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime
from pathlib import Path
from typing import Literal

import msgspec

#: What a mark's lease says about its day: held (``live``), held by a process that
#: outlived its lease (``stalled``), or free to take over (``expired``).
Verdict = Literal["live", "stalled", "expired"]
#: What is known of the holder's process: this process, another one running here, gone,
#: on another machine, or not named (a mark an older tether wrote).
Liveness = Literal["self", "alive", "gone", "elsewhere", "unknown"]


class Holder(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    host: str
    pid: int
    #: ``<boot id>/<start tick>`` where ``/proc`` tells it; empty where it does not.
    started: str = ""

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}"


def _started(pid: int) -> str:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may hold spaces and parentheses: count after its end.
    fields = stat[stat.rfind(")") + 2 :].split()
    return f"{boot}/{fields[19]}" if len(fields) > 19 else ""


def this_process() -> Holder:
    pid = os.getpid()
    return Holder(host=socket.gethostname(), pid=pid, started=_started(pid))


def liveness(holder: Holder | None) -> Liveness:
    if holder is None:
        return "unknown"
    me = this_process()
    if holder.host != me.host:
        return "elsewhere"
    if holder == me:
        return "self"
    if holder.started:
        return "alive" if _started(holder.pid) == holder.started else "gone"
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        return "alive"  # another user's process: it exists
    return "alive"


def verdict(lease_until: datetime | None, now: datetime, holder: Liveness) -> Verdict:
    """The mark's state at ``now`` (on the clock its lease is on). Pure."""
    if lease_until is not None and now < lease_until:
        return "live"
    if holder == "alive":
        return "stalled"
    return "expired"
