"""How a JavaScript/TypeScript function gets its dotted name from the tree-sitter tree (js_index.py's naming
rules, see its docstring): what holds it (`const f =`, `exports.f =`, `{ f() {} }`, a class field), its own name,
and the functions, classes, objects and namespaces around it (`Namer`), `this.x` named after whose `this` it is."""

from __future__ import annotations

import tree_sitter

FUNCTIONS = frozenset({
    "function_declaration", "generator_function_declaration", "function_expression", "generator_function",
    "arrow_function", "method_definition",
})  # fmt: skip
CLASSES = frozenset({"class_declaration", "abstract_class_declaration", "class"})
NAMESPACES = frozenset({"internal_module", "module"})  # TypeScript `namespace N {}` / `module N {}`
CONTAINERS = FUNCTIONS | CLASSES | NAMESPACES | {"object"}
WRAPPERS = frozenset({
    "parenthesized_expression", "as_expression", "satisfies_expression", "non_null_expression", "type_assertion",
})  # fmt: skip
FIELDS = frozenset({"field_definition", "public_field_definition"})
NamePath = tuple[str, ...]  # name segments; () is a transparent container (`module.exports = {...}`)
_EXPORTS: NamePath = ()


def node_text(node: tree_sitter.Node | None) -> str:
    return node.text.decode("utf-8", "surrogatepass") if node is not None and node.text is not None else ""


def key_name(key: tree_sitter.Node | None) -> str | None:
    """The name a property key gives: identifiers and #private names as written, a string's text when it is
    an identifier; None for computed, numeric and other keys (no dotted name can hold them)."""
    if key is None:
        return None
    if key.type in ("property_identifier", "private_property_identifier", "identifier"):
        return node_text(key)
    if key.type == "string":
        inner = node_text(key)[1:-1]
        return inner if inner.replace("$", "_").isidentifier() else None
    return None


def _member_path(node: tree_sitter.Node) -> NamePath | None:
    """`a.b.c` → ("a", "b", "c"), `this.x` → ("this", "x"); None when any part is computed or called."""
    parts: list[str] = []
    while node.type == "member_expression":
        prop = key_name(node.child_by_field_name("property"))
        inner = node.child_by_field_name("object")
        if prop is None or inner is None:
            return None
        parts.append(prop)
        node = inner
    if node.type not in ("identifier", "this"):
        return None
    parts.append(node_text(node))
    path = parts[::-1]
    if path[:2] == ["module", "exports"]:
        path = path[2:]
    elif path[0] == "exports":
        path = path[1:]
    return tuple(part for part in path if part != "prototype")


def _same(a: tree_sitter.Node | None, b: tree_sitter.Node) -> bool:
    return a is not None and a.id == b.id


def _held_as(node: tree_sitter.Node) -> NamePath | None:
    """The name an expression (function, arrow, class or object) takes from what holds it, or None."""
    child, parent = node, node.parent
    while parent is not None and parent.type in WRAPPERS:
        child, parent = parent, parent.parent
    if parent is None:
        return None
    if parent.type == "variable_declarator" and _same(parent.child_by_field_name("value"), child):
        target = parent.child_by_field_name("name")
        return (node_text(target),) if target is not None and target.type == "identifier" else None
    if parent.type == "assignment_expression" and _same(parent.child_by_field_name("right"), child):
        left = parent.child_by_field_name("left")
        return _member_path(left) if left is not None else None
    if parent.type == "pair" and _same(parent.child_by_field_name("value"), child):
        key = key_name(parent.child_by_field_name("key"))
        return (key,) if key is not None else None
    if parent.type in FIELDS and _same(parent.child_by_field_name("value"), child):
        key = key_name(parent.child_by_field_name("property") or parent.child_by_field_name("name"))
        return (key,) if key is not None else None
    if parent.type == "export_statement" and _same(parent.child_by_field_name("value"), child):
        return ("default",)
    return None


def own_path(node: tree_sitter.Node) -> NamePath | None:
    """The segments a function, class or object adds to the names inside it: None when anonymous."""
    if node.type == "method_definition":
        key = key_name(node.child_by_field_name("name"))
        return (key,) if key is not None else None
    if node.type in ("function_declaration", "generator_function_declaration", "class_declaration",
                     "abstract_class_declaration") or node.type in NAMESPACES:  # fmt: skip
        name = node.child_by_field_name("name")
        return (node_text(name),) if name is not None and name.type != "string" else None  # declare module "x" {}
    held = _held_as(node)
    own = node.child_by_field_name("name") if node.type != "object" else None
    if held == _EXPORTS and node.type != "object":  # module.exports = function () {}
        return (node_text(own),) if own is not None else ("default",)
    return held if held is not None or own is None else (node_text(own),)


class Namer:
    """Names of functions, classes and objects, each container's computed once."""

    def __init__(self) -> None:
        self._full: dict[int, NamePath] = {}

    def full(self, node: tree_sitter.Node) -> NamePath:
        """The whole name of a container: its enclosing containers' names, then its own (if it has one)."""
        chain: list[tree_sitter.Node] = []
        current: tree_sitter.Node | None = node
        while current is not None and current.id not in self._full:
            if current.type in CONTAINERS:
                chain.append(current)
            current = current.parent
        base = self._full[current.id] if current is not None else ()
        for container in reversed(chain):
            own = own_path(container)
            if own and own[0] == "this":
                base = self._this_owner(container) + own[1:]
            elif own is not None:
                base = base + own
            self._full[container.id] = base
        return self._full[node.id] if node.type in CONTAINERS else base

    def _this_owner(self, node: tree_sitter.Node) -> NamePath:
        """The name of what `this` is where `node` is: the class or object of the nearest method, or the
        nearest non-arrow function; a class field's or static block's class. Ancestors are named already."""
        current = node.parent
        while current is not None:
            if current.type == "class_body" and current.parent is not None:  # a field or a static block
                return self.full(current.parent)
            if current.type == "method_definition" and current.parent is not None:
                holder = current.parent  # an object, or a class body
                return self.full(holder.parent if holder.type == "class_body" and holder.parent else holder)
            if current.type in FUNCTIONS and current.type != "arrow_function":
                return self.full(current)
            current = current.parent
        return ()
