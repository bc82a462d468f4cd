"""Traced calls of every shape (tests/instrument/pytracer/test_pytracer_calls.py runs it under the tracer)."""

import asyncio
import threading


def add(a, b=2, *rest, scale=1, **options):
    return (a + b + sum(rest)) * scale


def outer(n):
    return inner(n) + inner(n + 1)


def inner(n):
    return add(n, 1)


class LookupFailed(LookupError):
    pass


def fails(depth):
    if depth == 0:
        raise LookupFailed(f"missing at depth {depth}")
    return fails(depth - 1)


def catches():
    try:
        fails(1)
    except LookupError:
        return "caught"


def hot(x):  # never a target: 100k calls
    return x + 1


def countdown(n):
    while n:
        yield n
        n -= 1
    return "done"


async def fetch(x):
    await asyncio.sleep(0)
    return x * 2


async def gather():
    return [await fetch(1), await fetch(2)]


async def ticks(n):
    for i in range(n):
        yield i * 10
        await asyncio.sleep(0)


async def consume():
    return [i async for i in ticks(2)]


def in_thread():
    return add(10)


def main():
    add(1, 2, 3, 4, scale=2, mode="x")
    outer(5)
    catches()
    total = 0
    for _ in range(100_000):
        total = hot(total)
    assert list(countdown(2)) == [2, 1]
    assert asyncio.run(gather()) == [2, 4]
    assert asyncio.run(consume()) == [0, 10]
    worker = threading.Thread(target=in_thread, name="worker-1")
    worker.start()
    worker.join()
    print(total)


main()
