"""The parent and a forked child each call a traced function; the child exits normally (atexit flushes it)."""

import os
import sys


def work(who):
    return who.upper()


work("parent-before")
pid = os.fork()
if pid == 0:
    work("child")
    sys.exit(0)
_, status = os.waitpid(pid, 0)
work("parent-after")
print(os.waitstatus_to_exitcode(status))
