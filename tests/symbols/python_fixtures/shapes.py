# ruff: noqa  (odd on purpose: every shape of function CPython compiles, one-liners and lambdas included)
"""A fixture for the Python function index: every kind of function CPython compiles into a code object.

Compiled (never run) by real interpreters in tests/symbols/test_python_index.py; keep it valid on 3.11+.
"""

import contextlib
import functools
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from collections.abc import Iterator

    def only_for_checkers(x: int) -> "Iterator[int]": ...

try:
    import json

    def loads_or_none(text):
        return json.loads(text)
except ImportError:  # pragma: no cover

    def loads_or_none(text):
        return None
finally:

    def after_import():
        pass


def plain(a, b=1, *args, c, d=2, **kwargs):
    return a


def positional_only(a, b, /, c, *, d):
    return a


def repeat(times):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for _ in range(times):
                fn(*args, **kwargs)

        return wrapper

    return decorate


@repeat(2)
@functools.lru_cache(
    maxsize=None,
)
def stacked(x):
    return x


@(
    repeat(3)
)
def decorator_expression_on_its_own_line():
    pass


def outer(n):
    captured = n

    def inner(m, captured_param):
        def innermost():
            return captured + m + captured_param

        return innermost

    class Local:
        def method(self):
            return captured

    square = lambda x: x * x  # noqa: E731
    pair = (lambda: 1, lambda: 2)
    return inner, Local, square, pair


def lambda_default(key=lambda item: item[0]):
    return key


class Outer:
    attribute = lambda self: 1  # noqa: E731
    first, second = (lambda: "a"), (lambda: "b")

    def method(self, x, __private, *, flag=lambda: True):
        return x

    @staticmethod
    def static(a, b):
        return a

    @classmethod
    def klass(cls, a):
        return cls

    @property
    def prop(self):
        return 1

    @prop.setter
    def prop(self, value):
        pass

    def __dunder__(self, __mangled, _single):
        def nested(__also_mangled):
            return __also_mangled

        return nested

    class Inner:
        def method(self):
            return self

        class Deepest:
            async def deep_async(self):
                return self


class __Underscored:
    def method(self, __hidden):
        return __hidden


async def coroutine(x):
    return x


async def async_generator(n):
    for i in range(n):
        yield i


def generator(n):
    yield from range(n)


def not_a_generator(n):
    def gen():
        yield n

    return [i for i in range(n)], (lambda: (yield))


def generator_in_expression():
    return (yield)


@overload
def overloaded(x: int) -> int: ...


@overload
def overloaded(x: str) -> str: ...


def overloaded(x):
    return x


def make_global():
    global made_global

    def made_global():
        return 1

    class Nested:
        global GlobalClass

        class GlobalClass:
            def method(self):
                pass

    return Nested


def comprehensions(items):
    listed = [lambda: i for i in items]
    keyed = {i: (lambda: i) for i in items}
    generated = (lambda: i for i in items)
    first_iterable = [x for x in (lambda: items)()]
    nested = [[lambda: (i, j) for j in items] for i in items]
    return listed, keyed, generated, first_iterable, nested


class WithComprehension:
    members = [lambda: k for k in range(3)]


module_lambda = lambda: 0  # noqa: E731
twins = lambda: 1, lambda: 2  # noqa: E731
nested_lambda = lambda x=lambda: 0: lambda: x  # noqa: E731

annotated: (lambda: int)() = 1


def annotations_in_function(x: (lambda: int)() = 0) -> (lambda: int)():
    local: (lambda: int)() = 1  # a local annotation is never evaluated: no code object
    return local


with contextlib.suppress(Exception):

    def in_with_block():
        pass


def one_liner(): return 1; 


def multi_line_signature(
    first,
    second,
):
    return first


match_value = 1
match match_value:
    case 1:

        def in_match():
            pass
    case _:
        pass


def takes_callable(argument):
    return lambda fn: fn


class Decorated(metaclass=lambda name, bases, namespace: type(name, bases, namespace)):
    @takes_callable(lambda: "evaluated in the class body")
    def method(self):
        return [y := 1, (lambda: y)]


async def async_comprehension(source):
    return [lambda: x async for x in source], await source


def guarded(value):
    match value:
        case int() if (lambda: True)():
            return 1
    return 0
