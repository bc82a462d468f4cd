"""Arguments the tracer must render without running any of the program's code. Every dunder or property below
that the tracer would run appends to RAN; the program prints RAN at the end (it must stay empty)."""

import collections
import contextlib
import dataclasses
import enum

RAN = []


class Color(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Point:
    x: int
    y: int
    label: str = "p"


class Slotted:
    __slots__ = ("a", "b", "unset")

    def __init__(self):
        self.a, self.b = 1, [2]


class Trap:
    """Every hook a careless renderer would call."""

    def __init__(self):
        self.visible = "plain attribute"

    def __repr__(self):
        RAN.append("__repr__")
        return "Trap()"

    def __str__(self):
        RAN.append("__str__")
        return "Trap"

    def __eq__(self, other):
        RAN.append("__eq__")
        return True

    def __hash__(self):
        RAN.append("__hash__")
        return 1

    def __getattr__(self, name):
        RAN.append(f"__getattr__({name})")
        return 0

    def __len__(self):
        RAN.append("__len__")
        return 0

    def __iter__(self):
        RAN.append("__iter__")
        return iter(())

    @property
    def computed(self):
        RAN.append("property")
        return 1


class Sneaky:
    """Overrides attribute access itself."""

    def __init__(self):
        self.field = 5

    def __getattribute__(self, name):
        RAN.append(f"__getattribute__({name})")
        return object.__getattribute__(self, name)


class Meta(type):
    def __getattribute__(cls, name):
        RAN.append(f"Meta.__getattribute__({name})")
        return type.__getattribute__(cls, name)


class WithMeta(metaclass=Meta):
    pass


class Sub(list):
    def __iter__(self):
        RAN.append("Sub.__iter__")
        return iter([])

    def __len__(self):
        RAN.append("Sub.__len__")
        return 0


class Plain:
    pass


class Loud(ValueError):
    def __str__(self):
        RAN.append("Loud.__str__")
        return "loud"


def show(cycle, node, deep, point, slotted, trap, sneaky, klass, instance, sub, color, raw, big, nan, inf, long,
         many, mapping, queue, pair, frozen, empty, error, function):
    return 0


def fail_loud():
    raise Loud("quiet args")


cycle = [1]
cycle.append(cycle)
node = {"name": "root"}
node["self"] = node
deep = [[[[["bottom"]]]]]

show(
    cycle=cycle, node=node, deep=deep, point=Point(1, 2), slotted=Slotted(), trap=Trap(), sneaky=Sneaky(),
    klass=WithMeta, instance=WithMeta(), sub=Sub([1, 2]), color=Color.RED, raw=b"\x00\xffabc",
    big=2**70, nan=float("nan"), inf=float("-inf"), long="x" * 300, many=list(range(25)),
    mapping={1: "one", (1, 2): "pair", Plain(): "object key"}, queue=collections.deque([1, 2]),
    pair=collections.namedtuple("Pair", "left right")(1, 2), frozen=frozenset({3}), empty=set(),
    error=KeyError("k"), function=show,
)
with contextlib.suppress(Loud):
    fail_loud()
print("RAN=" + ",".join(RAN))
