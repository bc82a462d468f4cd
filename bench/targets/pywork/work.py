"""The benchmark's Python workload (bench/python_bench.py): `hot` is the function whose calls are timed, the others
are small functions the loops call rarely, so a tracer can be given a target that is not in the hot loop."""


def hot(a: int, b: int) -> int:
    """Called CALLS times per timed loop."""
    return a + b


def paced(a: int, b: int) -> int:
    """Called at a steady rate by the sustained-ingest run."""
    return a ^ b


def checksum(total: int) -> int:
    """Called once after each timed loop: the one function traced when measuring the cost on untraced ones."""
    return total & 0xFFFF


def describe(calls: int, reps: int) -> str:
    """Called once at start-up."""
    return f"{reps} loops of {calls} calls"
