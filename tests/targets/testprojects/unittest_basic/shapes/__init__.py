"""Plane shapes: the code under test."""
