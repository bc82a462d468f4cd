"""A traced function called far more often than the tracer's buffer holds (its helper never flushes here)."""


def tick(i):
    return i


for i in range(5000):
    tick(i)
