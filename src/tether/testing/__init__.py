"""Public test helpers shipped with tether: real servers and fakes, never mocks of our classes."""

from tether.testing.fake_llama import FakeLlama, RecordedRequest, Reply, serve_forever

__all__ = ["FakeLlama", "RecordedRequest", "Reply", "serve_forever"]
