"""Waits once for the test (see steps.py), then ends."""

import os

go = os.fdopen(int(os.environ["STROBE_TEST_GO_FD"]), "rb", buffering=0)
print("ready", flush=True)
assert go.readline() == b"go\n"
