"""Log messages of logpoints inside the traced interpreter: `{expr}` templates parsed once and rendered per hit.

Executed in the target after backends.py and before breaks.py, in the same private module (tracer.py has the
module's contract); breaks.py compiles each logpoint's message with `parse_template` and renders it at each hit.

    parts = parse_template("n={n} total={cart.total:.2f} {name!r}")
    render_template(parts, frame.f_globals, frame.f_locals)   # 'n=3 total=12.50 \'bolt\''
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType
    from typing import TypeAlias

    from .reprs import exc_message, tname

    Template: TypeAlias = list[str | tuple[CodeType, str, str]]  # literal text and (code, conversion, spec) parts

_LOG_CHARS = 1000


def _compile(expr: str, what: str) -> "CodeType":
    try:
        return compile(expr.strip(), f"<{what}>", "eval", dont_inherit=True)
    except SyntaxError as exc:
        raise SyntaxError(f"{what} {expr[:200]!r} is not a Python expression: {exc.msg}"
                          + (f" (column {exc.offset})" if exc.offset else "")) from None


def parse_template(text: str) -> "Template":
    """A log message's literal text and `{expr}` parts (f-string style: `{expr!r}`, `{expr:>8}`, `{{` and `}}`)."""
    parts: Template = []
    literal: list[str] = []
    at, size = 0, len(text)
    while at < size:
        char = text[at]
        if char in "{}" and text.startswith(char, at + 1):
            literal.append(char)
            at += 2
        elif char == "}":
            raise SyntaxError(f"log message {text[:200]!r}: a single '}}' (write '}}}}' for a brace)")
        elif char == "{":
            if literal:
                parts.append("".join(literal))
                literal = []
            end, expr, conversion, spec = _field(text, at + 1)
            if not expr.strip():
                raise SyntaxError(f"log message {text[:200]!r}: an empty {{}} (write '{{{{' for a brace)")
            parts.append((_compile(expr, "log expression"), conversion, spec))
            at = end + 1
        else:
            literal.append(char)
            at += 1
    if literal:
        parts.append("".join(literal))
    return parts


def _field(text: str, start: int) -> tuple[int, str, str, str]:
    """(index of the closing brace, expression, conversion, format spec) of the field opened before `start`."""
    depth, quote, at, size = 0, "", start, len(text)
    while at < size:
        char = text[at]
        if quote:
            if char == "\\":
                at += 2
                continue
            if text.startswith(quote, at):
                at += len(quote)
                quote = ""
                continue
        elif char in "'\"":
            quote = char * 3 if text.startswith(char * 3, at) else char
            at += len(quote)
            continue
        elif char in "([{":
            depth += 1
        elif char in ")]" or (char == "}" and depth > 0):
            depth -= 1
        elif depth == 0 and (char in "}:" or (char == "!" and not text.startswith("!=", at))):
            expr, conversion = text[start:at], ""
            if char == "!":
                conversion = text[at + 1: at + 2]
                if conversion not in ("r", "s", "a") or text[at + 2: at + 3] not in ("}", ":"):
                    raise SyntaxError(f"log message {text[:200]!r}: the conversion after '!' must be r, s or a")
                at += 2
                char = text[at]
            spec = ""
            if char == ":":
                end = text.find("}", at)
                if end < 0:
                    break
                spec, at = text[at + 1: end], end
                if "{" in spec:
                    raise SyntaxError(f"log message {text[:200]!r}: a format spec cannot hold {{fields}}")
            return at, expr, conversion, spec
        at += 1
    raise SyntaxError(f"log message {text[:200]!r}: a '{{' is never closed (write '{{{{' for a brace)")


def render_template(parts: "Template", scope: dict[str, object], local: object) -> str:
    """The message, each part evaluated in the frame's globals and locals; a part that raises shows the error."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        code, conversion, spec = part
        try:
            value = eval(code, scope, local)  # type: ignore[arg-type]  # locals: any mapping
            if conversion:
                value = repr(value) if conversion == "r" else str(value) if conversion == "s" else ascii(value)
            out.append(format(value, spec))
        except Exception as exc:
            out.append(f"<error: {tname(type(exc))}: {exc_message(exc, 200)}>")
    text = "".join(out)
    return text if len(text) <= _LOG_CHARS else text[: _LOG_CHARS - 1] + "…"
