"""Values of a traced CPython process as bounded JSON, read without running the program's code.

Part of the tracer Strobe injects into a target interpreter (see `tracer.py`): this text runs first, in the
same private module namespace, and must stay stdlib-only and valid on CPython 3.11-3.13.

    r = Renderer(depth=3)
    r.render(Cart(items=[1, 2]))        # {"__type__": "shop.Cart", "items": [1, 2]}
    read_chain(parse_chain("pkg.config.settings.timeout"))   # the value, or ChainError saying why not

Nothing here calls a user `__repr__`, `__eq__`, `__getattr__`, `__getattribute__`, property or other
Python-level descriptor: types are read through `type`'s own C descriptors, instance state through the
`__dict__` and slot descriptors found in the class dicts. An object that is none of the kinds below renders
as "<mod.Class object>"; a rendering that fails as "<unrenderable: why>".
"""

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

_type_dict = type.__dict__["__dict__"].__get__
_type_mro = type.__dict__["__mro__"].__get__
_type_module = type.__dict__["__module__"].__get__
_type_qualname = type.__dict__["__qualname__"].__get__
_type_flags = type.__dict__["__flags__"].__get__
_GETSET = type(type.__dict__["__dict__"])
_HEAPTYPE = 1 << 9
_MAX_INT = 2**53
_BYTES_SHOWN = 32
_MISSING = object()


class _Slotted:
    __slots__ = ("slot",)


_MEMBER = type(_Slotted.__dict__["slot"])
_FUNCTION = type(lambda: None)
_MODULE = type(sys)
_func_qualname = _FUNCTION.__dict__["__qualname__"].__get__
_exc_args = BaseException.__dict__["args"].__get__


class ChainError(Exception):
    """A dotted chain that cannot be read without running code (the message says why and what is accepted)."""


def lookup(cls: type, name: str) -> object:
    """`name` from the first class dict along `cls`'s MRO (no metaclass code), else _MISSING."""
    for klass in _type_mro(cls):
        found = _type_dict(klass).get(name, _MISSING)
        if found is not _MISSING:
            return found
    return _MISSING


def tname(cls: type) -> str:
    """"pkg.mod.Class" ("ValueError" for builtins)."""
    module, qualname = _type_module(cls), _type_qualname(cls)
    if type(qualname) is not str:
        qualname = "?"
    if type(module) is not str or module == "builtins":
        return qualname
    return module + "." + qualname


def instance_dict(obj: object) -> dict[str, object] | None:
    """The instance `__dict__` through the C descriptor of its class, never a user-defined `__dict__`."""
    found = lookup(type(obj), "__dict__")
    if type(found) is not _GETSET and type(found) is not _MEMBER:  # a module's is a member
        return None
    value = found.__get__(obj, type(obj))  # type: ignore[attr-defined]
    return value if issubclass(type(value), dict) else None


def instance_attr(obj: object, name: str) -> object:
    """An attribute stored on the instance (its dict, then a slot), else _MISSING. Runs no user code."""
    own = instance_dict(obj)
    if own is not None:
        value = dict.get(own, name, _MISSING)
        if value is not _MISSING:
            return value
    slot = lookup(type(obj), name)
    if type(slot) is _MEMBER:
        try:
            return slot.__get__(obj, type(obj))  # type: ignore[attr-defined]
        except AttributeError:
            return _MISSING
    return _MISSING


def _is_scalar(value: object) -> bool:
    return value is None or type(value) in (str, int, float, bool, bytes)


def exc_message(exc: BaseException, limit: int = 500) -> str:
    """str(exc) when that runs only C code (a builtin __str__ over builtin scalar args), else the rendered args."""
    args = _exc_args(exc)
    if type(lookup(type(exc), "__str__")) is not _FUNCTION and all(_is_scalar(a) for a in args):
        text = str(exc)
    else:
        text = ", ".join(str(Renderer(1).render(a)) for a in args)
    return text if len(text) <= limit else text[:limit] + f"…({len(text)} chars)"


class Renderer:
    """Bounded JSON-ready renderings: `depth` levels of containers/objects, `items` entries each, `chars` per str.
    Safe to share between threads (a rendering keeps its cycle guard to itself)."""

    def __init__(self, depth: int = 3, items: int = 20, chars: int = 200) -> None:
        self.depth, self.items, self.chars = depth, items, chars

    def render(self, value: "Any", level: int = 0, active: set[int] | None = None) -> object:
        t = type(value)
        if t is str:
            return value if len(value) <= self.chars else self._long_str(value)
        if t is int:
            return value if -_MAX_INT <= value <= _MAX_INT else self._big_int(value)
        if value is None or t is bool:
            return value
        if t is float:
            return value if value - value == 0.0 else str(value)  # nan and inf as strings
        try:
            return self._other(value, t, level, active)
        except Exception as exc:  # a rendering never raises into the tracer
            return f"<unrenderable: {type(exc).__name__}>"

    def _long_str(self, value: str) -> str:
        return value[: self.chars] + f"…({len(value)} chars)"

    def _big_int(self, value: int) -> str:
        if value.bit_length() > 3000:
            return f"<int of {value.bit_length()} bits>"
        text = int.__repr__(value)
        return text if len(text) <= self.chars else self._long_str(text)

    def _other(self, value: "Any", t: type, level: int, active: set[int] | None) -> object:
        enum = sys.modules.get("enum")
        if enum is not None and issubclass(t, enum.Enum):
            name = instance_attr(value, "_name_")
            if type(name) is str:
                return tname(t) + "." + name
            return {"__type__": tname(t), "value": self.render(instance_attr(value, "_value_"), self.depth)}
        if issubclass(t, (bytes, bytearray)):
            base: Any = bytes if issubclass(t, bytes) else bytearray
            head = bytes(base.__getitem__(value, slice(0, _BYTES_SHOWN)))
            return {"bytes": head.hex(), "len": base.__len__(value)}
        # subclasses of the scalars: the base value, copied by the base type's own C method
        if issubclass(t, bool):
            return int.__index__(value) != 0
        if issubclass(t, int):
            return self.render(int.__index__(value))
        if issubclass(t, str):
            return self.render(str.__str__(value))
        if issubclass(t, float):
            return self.render(float.__float__(value))
        if issubclass(t, type):
            return "<class " + tname(value) + ">"
        if t is _FUNCTION:
            return "<function " + str(_func_qualname(value)) + ">"
        if issubclass(t, _MODULE):
            own = instance_dict(value)
            return "<module " + str(own.get("__name__") if own is not None else "?") + ">"
        if level >= self.depth:
            return "<" + tname(t) + ">"
        if active is None:
            active = set()
        key = id(value)
        if key in active:
            return "<cycle " + tname(t) + ">"
        active.add(key)
        try:
            return self._expand(value, t, level + 1, active)
        finally:
            active.discard(key)

    def _expand(self, value: "Any", t: type, level: int, active: set[int]) -> object:
        if issubclass(t, dict):
            kind = None if t is dict else tname(t)
            return self._mapping(dict.items(value), dict.__len__(value), level, active, kind)
        if issubclass(t, BaseException):
            return {"__type__": tname(t), "message": exc_message(value)}
        if issubclass(t, tuple):
            size = tuple.__len__(value)
            fields = lookup(t, "_fields")  # a namedtuple
            if type(fields) is not tuple:
                fields = lookup(t, "__match_args__")  # a struct sequence (os.stat_result, sys.flags...)
            if type(fields) is tuple and len(fields) == size and all(type(f) is str for f in fields):
                return self._mapping(zip(fields, tuple.__iter__(value), strict=True), size, level, active, tname(t))
            return self._sequence(tuple.__iter__(value), size, level, active)
        deque = getattr(sys.modules.get("collections"), "deque", None)
        bases: tuple[Any, ...] = (list, set, frozenset, deque)
        for base in bases:
            if base is not None and issubclass(t, base):
                return self._sequence(base.__iter__(value), base.__len__(value), level, active)
        return self._object(value, t, level, active)

    def _sequence(self, items: "Iterator[object]", size: int, level: int, active: set[int]) -> list[object]:
        out: list[object] = []
        for item in items:
            if len(out) == self.items:
                out.append(f"…{size - self.items} more")
                break
            out.append(self.render(item, level, active))
        return out

    def _mapping(self, pairs: "Iterable[tuple[object, object]]", size: int, level: int, active: set[int],
                 kind: str | None) -> dict[str, object]:
        out: dict[str, object] = {} if kind is None else {"__type__": kind}
        for shown, (key, item) in enumerate(pairs):
            if shown == self.items:
                out["…"] = f"{size - self.items} more"
                break
            out[self._key(key)] = self.render(item, level, active)
        return out

    def _key(self, key: object) -> str:
        if type(key) is str:
            return key
        if _is_scalar(key) or (type(key) is tuple and all(_is_scalar(k) for k in key)):
            return repr(key)
        rendered = self.render(key, self.depth)
        return rendered if type(rendered) is str else "<" + tname(type(key)) + ">"

    def _object(self, value: "Any", t: type, level: int, active: set[int]) -> object:
        """A dataclass's fields, else the instance dict then the slots (first `items` set ones)."""
        fields: Any = lookup(t, "__dataclass_fields__")
        names: list[str] = []
        if issubclass(type(fields), dict):
            names = [n for n in dict.__iter__(fields) if type(n) is str]
        else:
            own = instance_dict(value)
            if own is not None:
                names = [n for n in dict.__iter__(own) if type(n) is str]
            for klass in _type_mro(t):
                names.extend(n for n, d in _type_dict(klass).items() if type(d) is _MEMBER and n not in names)
        out: dict[str, object] = {"__type__": tname(t)}
        for name in names:
            item = instance_attr(value, name)
            if item is _MISSING:
                continue
            if len(out) > self.items:
                out["…"] = "more attributes"
                break
            out[name] = self.render(item, level, active)
        return out if len(out) > 1 else "<" + tname(t) + " object>"


_CHAIN_HELP = ("accepted: a dotted chain of identifiers rooted at a loaded module, e.g. `pkg.config.settings.timeout`"
               " or `__main__.counter` (no calls, indexing, spaces or operators)")


def parse_chain(expr: object) -> list[str]:
    """`expr` split into identifiers, or ChainError with what is accepted."""
    if type(expr) is not str or not expr or len(expr) > 500:
        raise ChainError(f"not a dotted name: {str(expr)[:80]!r}; " + _CHAIN_HELP)
    parts = expr.split(".")
    if not all(p.isidentifier() for p in parts):
        raise ChainError(f"not a dotted name: {expr[:80]!r}; " + _CHAIN_HELP)
    return parts


def read_chain(parts: list[str]) -> object:
    """The value at the end of a parsed chain: the longest loaded module prefix, then attributes read statically."""
    for end in range(len(parts), 0, -1):
        obj: object = sys.modules.get(".".join(parts[:end]))
        if obj is not None:
            break
    else:
        raise ChainError(f"no loaded module named `{parts[0]}`: the chain must start with a module in sys.modules"
                         " (the program's script is `__main__`)")
    path = ".".join(parts[:end])
    for name in parts[end:]:
        obj = static_attr(obj, name, path)
        path += "." + name
    return obj


def static_attr(obj: "Any", name: str, path: str = "the object") -> object:
    """obj.name as the interpreter would find it, but never running a property, descriptor or __getattr__."""
    t = type(obj)
    if issubclass(t, type):
        for klass in _type_mro(obj):
            found = _type_dict(klass).get(name, _MISSING)
            if found is not _MISSING:
                return found
    found = lookup(t, name)
    if found is not _MISSING and _is_data_descriptor(found):
        kind = type(found)
        if issubclass(kind, property):
            raise ChainError(f"`{path}.{name}` is a property: not read (it would run code)")
        if kind is _MEMBER or kind is _GETSET:
            try:
                return found.__get__(obj, t)  # type: ignore[attr-defined]
            except AttributeError:
                raise ChainError(f"`{path}.{name}` is not set") from None
        raise ChainError(f"`{path}.{name}` is a {tname(kind)} descriptor: not read (it would run code)")
    own = instance_dict(obj)
    if own is not None:
        value = dict.get(own, name, _MISSING)
        if value is not _MISSING:
            return value
    if found is not _MISSING:
        kind = type(found)
        if _type_flags(kind) & _HEAPTYPE and lookup(kind, "__get__") is not _MISSING:
            raise ChainError(f"`{path}.{name}` is a {tname(kind)} descriptor: not read (it would run code)")
        return found
    hook = "__getattr__" if issubclass(t, _MODULE) and own is not None and "__getattr__" in own else None
    if hook is None and lookup(t, "__getattr__") is not _MISSING:
        hook = tname(t) + ".__getattr__"
    if hook is not None:
        raise ChainError(f"`{path}` has no attribute `{name}` stored; its {hook} was not run (it would run code)")
    raise ChainError(f"`{path}` has no attribute `{name}`")


def _is_data_descriptor(value: object) -> bool:
    kind = type(value)
    return lookup(kind, "__set__") is not _MISSING or lookup(kind, "__delete__") is not _MISSING
