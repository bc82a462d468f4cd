"""A tiny calculator: the code under test."""
