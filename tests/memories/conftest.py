"""Fixtures shared by the memories tests (the cast is in tests/conftest.py)."""

import pytest


@pytest.fixture
def episode(remember):
    """``episode(key, at, path="talks/one", **fields)``: an episodic turn of alice's agent,
    its content ``turn <key>``."""
    def _episode(key, at, path="talks/one", **fields):
        return remember(category="context", key=key, content=f"turn {key}",
                        memory_type="episodic", path=path, occurred_at=at, **fields)
    return _episode
