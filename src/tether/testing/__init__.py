"""Public test helpers shipped with tether: real servers and fakes, never mocks of our classes.

Only tests and ``tether fake-llm`` import this package; production code reaches its fault
points through ``tether.faults``. The fake server is loaded on first use, so importing a
small helper (``tether.testing.clock``) does not load ``http.server``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.testing.fake_llama import FakeLlama, RecordedRequest, Reply, serve_forever

__all__ = ["FakeLlama", "RecordedRequest", "Reply", "serve_forever"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tether.testing import fake_llama

        return getattr(fake_llama, name)
    raise AttributeError(f"module 'tether.testing' has no attribute {name!r}")
