"""The event store: one SQLite file in WAL mode, written by a single thread, read by many."""
