"""What the tests of recall's vectors share: the mark that skips them, saying why, where
the extra ``tether[vectors]`` (the embedding model's runtime) is not installed."""

from __future__ import annotations

import pytest

from tether.llm import embedder

#: The first module of the extra that is missing, or None.
MISSING = embedder.missing()
NEEDS_VECTORS = pytest.mark.skipif(
    MISSING is not None,
    reason=f"extra tether[vectors] not installed ({MISSING} missing): pip install -e '.[vectors]'",
)
