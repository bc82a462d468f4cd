"""Imported by breaks.py once the test's breakpoints are set: code objects created after their breakpoints."""


def triple(v):
    return v * 3  # @triple


total = triple(2)  # @later-module
