"""Fixtures of the event JSON tests: the timeline-query data set of tests/store (query_dataset.py)."""

from tests.store.query_dataset import conn, data

__all__ = ["conn", "data"]
