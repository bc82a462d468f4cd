"""A worker thread dies of an uncaught exception, then the main thread does (the program exits 1)."""

import threading


class BadState(RuntimeError):
    pass


def check(order, limit):
    remaining = limit - len(order)
    if remaining < 0:
        raise BadState(f"{len(order)} items over a limit of {limit}")
    return remaining


def worker():
    secret = {"token": "t-1"}
    check([1, 2, 3], 1)
    return secret


def handle(request_id):
    order = ["apple", "pear"]
    return check(order, 0)


thread = threading.Thread(target=worker, name="crasher")
thread.start()
thread.join()
handle(42)
