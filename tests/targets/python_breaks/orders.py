"""Orders added to an account: the functions and lines the Python breakpoint tests stop at."""

LIMIT = 1000


class Account:
    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.total = 0


def add_to(acc: Account, n: int) -> int:
    before = acc.total
    acc.total = before + n
    return acc.total


def process_order(oid: int, qty: int, acc: Account) -> int:
    if qty > LIMIT:
        return -1
    total = add_to(acc, qty)
    print(f"order {oid} qty {qty} total {total}", flush=True)
    return total


def factorial(n: int) -> int:
    if n <= 1:
        return 1
    return n * factorial(n - 1)
