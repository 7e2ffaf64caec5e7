"""The part of YAML a Prometheus web configuration file uses, read strictly.

`--web.config.file` takes the file node_exporter takes: nested mappings of short strings
(paths, user names, bcrypt hashes, a few words), written in YAML. gputui has no YAML
library and needs only that much of it, so this reads exactly that much and refuses the
rest with the line number, rather than guessing: mappings nested by indentation, plain,
'single-' and "double-quoted" scalars on one line, comments, `true`/`false`, `null`/`~`,
an empty `{}`, and a leading `---`. A duplicate key is an error (in a list of users a
second entry silently replacing the first would be a security surprise). Lists, anchors,
tags, flow collections and multi-line scalars are refused.

Values come back as `str`, `bool`, `None` or `dict` (a mapping); numbers stay strings,
which is all the format needs.
"""

from __future__ import annotations

from dataclasses import dataclass

# Characters that start something this reader does not support when they begin a value.
_INDICATORS = {
    "[": "flow lists", "{": "flow mappings", "&": "anchors", "*": "aliases", "!": "tags",
    "|": "multi-line values (|)", ">": "multi-line values (>)", "%": "directives",
    "@": "values starting with @", "`": "values starting with `", "-": "lists",
    "?": "complex keys",
}


class YamlSubsetError(ValueError):
    """What is wrong, with its line number ("line 3: ...")."""


@dataclass
class _Level:
    indent: int
    mapping: dict[str, object]


def _error(lineno: int, what: str) -> YamlSubsetError:
    return YamlSubsetError(f"line {lineno}: {what}")


def _strip_comment(text: str) -> str:
    """`text` without a trailing ` # comment`: a # starts one at the line's start or after
    a space, outside a quoted key or value (quotes count only where a key or a value
    starts, as the reader accepts them)."""
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if quote == '"' and ch == "\\":
                i += 1  # the escaped character cannot end the quote
            elif ch == quote and quote == "'" and text[i + 1:i + 2] == "'":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"" and (i == 0 or (text[i - 1] in " \t"
                                          and text[:i].rstrip(" \t").endswith(":"))):
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
        i += 1
    return text.rstrip()


def _quoted(text: str, lineno: int) -> tuple[str, str]:
    """A quoted scalar at the start of `text` → (its value, what follows it)."""
    quote = text[0]
    out: list[str] = []
    i = 1
    while i < len(text):
        ch = text[i]
        if quote == "'" and ch == "'":
            if text[i + 1:i + 2] == "'":  # '' is a quote inside single quotes
                out.append("'")
                i += 2
                continue
            return "".join(out), text[i + 1:]
        if quote == '"' and ch == "\\":
            nxt = text[i + 1:i + 2]
            if nxt not in ('"', "\\"):
                raise _error(lineno, f"the escape \\{nxt} is not supported (only \\\" and \\\\)")
            out.append(nxt)
            i += 2
            continue
        if quote == '"' and ch == '"':
            return "".join(out), text[i + 1:]
        out.append(ch)
        i += 1
    raise _error(lineno, f"no closing {quote} (a quoted value must end on its line)")


def _scalar(text: str, lineno: int) -> object:
    """A value after `key: ` (comment already removed; "" when there is none)."""
    if not text:
        return None
    if text[0] in "'\"":
        value, rest = _quoted(text, lineno)
        if _strip_comment(rest).strip():
            raise _error(lineno, f"unexpected text after the quoted value: {rest.strip()!r}")
        return value
    if text == "{}":
        return {}
    what = _INDICATORS.get(text[0])
    if what is not None and not (text[0] == "-" and text[1:2] not in ("", " ")):
        raise _error(lineno, f"{what} are not supported here")
    if ": " in text or text.endswith(":"):
        raise _error(lineno, f"a value cannot hold ': ' unless quoted: {text!r}")
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text in ("null", "Null", "NULL", "~"):
        return None
    return text


def _key(text: str, lineno: int) -> tuple[str, str]:
    """`key: rest` → (key, rest after the colon)."""
    if text[0] in "'\"":
        key, rest = _quoted(text, lineno)
        if not (rest.startswith(":") and (len(rest) == 1 or rest[1] in " \t")):
            raise _error(lineno, "expected ':' after the quoted key")
        return key, rest[1:].strip()
    if text.startswith("- ") or text == "-":
        raise _error(lineno, "lists are not supported")
    what = _INDICATORS.get(text[0])
    if what is not None:
        raise _error(lineno, f"{what} are not supported")
    colon = text.find(": ")
    if colon < 0 and text.endswith(":"):
        colon = len(text) - 1
    if colon <= 0:
        raise _error(lineno, f"expected 'key: value', got {text!r}")
    return text[:colon].rstrip(), text[colon + 1:].strip()


def parse(text: str) -> dict[str, object]:
    """The document's top-level mapping ({} for an empty document); YamlSubsetError if it
    uses anything outside the subset."""
    root: dict[str, object] = {}
    stack = [_Level(0, root)]
    # The key whose value was left empty on the line before: a more indented line opens a
    # mapping under it.
    open_key: tuple[dict[str, object], str, int] | None = None
    seen_content = False
    for lineno, raw in enumerate(text.lstrip("\ufeff").splitlines(), start=1):
        body = raw.lstrip(" \t")
        content = _strip_comment(body)
        if not content:
            continue
        indent = len(raw) - len(body)
        if "\t" in raw[:indent]:
            raise _error(lineno, "tabs cannot indent YAML (use spaces)")
        if content in ("---", "..."):
            if indent == 0 and not seen_content and content == "---":
                continue
            raise _error(lineno, "only one YAML document is supported")
        seen_content = True
        if open_key is not None and indent > stack[-1].indent:
            parent, name, _ = open_key
            child: dict[str, object] = {}
            parent[name] = child
            stack.append(_Level(indent, child))
        elif indent > stack[-1].indent:
            raise _error(lineno, "unexpected indentation (values cannot span lines)")
        else:
            while stack and indent < stack[-1].indent:
                stack.pop()
            if not stack or indent != stack[-1].indent:
                raise _error(lineno, "the indentation matches no enclosing key")
        open_key = None
        key, rest = _key(content, lineno)
        mapping = stack[-1].mapping
        if key in mapping:
            raise _error(lineno, f"duplicate key {key!r}")
        value = _scalar(rest, lineno)
        mapping[key] = value
        if value is None:
            open_key = (mapping, key, lineno)
    return root
