"""Fixtures of the timeline-query tests (the shared data set lives in query_dataset.py)."""

from tests.store.query_dataset import conn, data

__all__ = ["conn", "data"]
