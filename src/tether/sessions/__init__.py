"""Session directories on disk: epoch files, append (lock + fsync), open and resume."""

from tether.sessions.session import Session, list_sessions, session_dir

__all__ = ["Session", "list_sessions", "session_dir"]
