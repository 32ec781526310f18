"""What the owner may do from the page: the CLI's own edits, through the same services,
with the same rules and journal entries.

- Edit an identity entry: ``Identity.consolidate`` of that one entry into the new text
  (journalled ``consolidate``, before and after), the text screened for secrets first,
  refused unless the form asks to store it redacted, as ``memory add --redact`` does.
- Remove an identity entry: ``Identity.remove`` (journalled ``remove``), as ``memory remove``.
- Promote a trusted note into identity: its text screened, one line, then
  ``Identity.add`` (journalled ``add``), as ``memory add`` of that text would. An untrusted
  note is never promoted (it came from content the owner did not write).
- Redact the secrets ``memory scan`` found: ``scan_memory(fix=True)``, as ``memory scan
  --redact`` (journalled ``redact`` per place, never the secret).
- Discard a session from the sweep: ``sweep.marks.discard``, as ``session discard``.

Each returns where the browser goes next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request

from tether.errors import BadInputError, NotFoundError
from tether.ids import session_id
from tether.scan.allow import ALLOW_FILE, home_allow, load_allow_file
from tether.scan.screen import Screened, screen
from tether.ui.views import store_of, sweep_of

if TYPE_CHECKING:
    from tether.ui.app import UiServices

Form = dict[str, str]


def _screened(services: UiServices, text: str, what: str, form: Form) -> Screened:
    path = services.home / ALLOW_FILE
    return screen(
        text,
        what=what,
        allow=load_allow_file(path),
        on_secret="redact" if form.get("redact") == "on" else "refuse",
        allow_file=str(path),
    )


def _one_line(screened: Screened) -> None:
    from tether.memory.identity import entry_lines

    lines = entry_lines(screened.text)
    if lines > 1:
        raise BadInputError(
            f"an identity entry is one line (this text has {lines}); keep longer text "
            "in a note or a page"
        )


def edit_entry(services: UiServices, request: Request, form: Form) -> str:
    from tether.memory.identity import Identity

    eid = request.path_params["eid"]
    screened = _screened(services, form.get("text", ""), "identity entry", form)
    _one_line(screened)
    with store_of(services) as store:
        e = Identity(services.home, store).consolidate(
            [eid], screened, who="owner", session=None, time=services.now()
        )
    return f"/memory#{e.id}"


def remove_entry(services: UiServices, request: Request, _form: Form) -> str:
    from tether.memory.identity import Identity

    with store_of(services) as store:
        Identity(services.home, store).remove(
            [request.path_params["eid"]], who="owner", session=None, time=services.now()
        )
    return "/memory"


def promote_note(services: UiServices, request: Request, form: Form) -> str:
    from tether.memory.identity import Identity

    nid: int = request.path_params["nid"]
    with store_of(services) as store:
        note = next((n for n in store.notes() if n.id == nid), None)
        if note is None:
            raise NotFoundError(f"no note {nid}")
        if note.untrusted:
            raise BadInputError(
                f"note {nid} is untrusted (written after the agent read outside content): "
                "it is never promoted; add the entry yourself if it is right"
            )
        screened = _screened(services, note.text, "identity entry", form)
        _one_line(screened)
        e = Identity(services.home, store).add(
            screened, who="owner", session=None, time=services.now()
        )
    return f"/memory#{e.id}"


def redact_secrets(services: UiServices, _request: Request, _form: Form) -> str:
    from tether.memory.identity import Identity
    from tether.memory.secret_scan import scan_memory

    allow = home_allow(services.home)
    with store_of(services) as store, sweep_of(services) as sweep:
        scan_memory(
            Identity(services.home, store),
            store,
            allow=allow,
            fix=True,
            time=services.now(),
            sweep=sweep,
        )
    return "/scan"


def discard_session(services: UiServices, request: Request, _form: Form) -> str:
    from tether.sweep.marks import discard

    sid = session_id(request.path_params["sid"])
    discard(services.home, lambda: store_of(services), sid, undo=False, time=services.now())
    return f"/sessions/{sid}"
