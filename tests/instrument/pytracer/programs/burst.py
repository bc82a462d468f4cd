"""One traced call, a wait, then a burst of 2100 traced calls (4200 events), a wait (see steps.py for waits)."""

import os

go = os.fdopen(int(os.environ["STROBE_TEST_GO_FD"]), "rb", buffering=0)


def tick(i):
    return i


def wait(name):
    print(name, flush=True)
    assert go.readline() == b"go\n"


tick(-1)
wait("one")
for i in range(2100):
    tick(i)
wait("burst")
