"""A URL as tether prints or logs it: never its userinfo.

``scheme://user:password@host`` is how PostgreSQL, an inference server behind a proxy or a
git remote carry a credential; an error, ``tether doctor``, the daemon's log and the egress
log print URLs. The whole userinfo goes (a user name alone can be a token), then any
other secret the rules find (a key in a query string) is redacted. Pure: no I/O.
"""

from __future__ import annotations

import re

from tether.scan.secrets import redact

#: The userinfo of every ``scheme://userinfo@`` in a text.
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]{0,31}://)[^\s/?#@\[\]]{1,512}@")
HIDDEN = "[REDACTED:url-userinfo]"


def shown_url(text: str) -> str:
    """``text`` (a URL, or a line holding URLs) with each URL's userinfo replaced by
    ``[REDACTED:url-userinfo]`` and any other secret redacted."""
    return redact(_USERINFO.sub(lambda match: f"{match['head']}{HIDDEN}@", text)).text
