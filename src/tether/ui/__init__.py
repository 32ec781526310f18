"""``tether ui``: a local memory browser, server-rendered, behind a one-time login token."""
