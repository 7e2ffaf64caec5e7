"""Text that came from outside gputui, made safe to show.

Process names and arguments, user names, hostnames, metric labels and result files are
written by other people. A raw ESC or OSC in them would clear the screen or retitle the
terminal, and Rich/Textual markup in them would be interpreted (``[link=file:///…]``).
Every such string goes through :func:`printable` before it is shown, and through
:func:`no_markup` (or a ``rich.text.Text``) where markup is parsed.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls, and the Unicode bidi overrides/isolates that can make
# text read in an order other than the one it is stored in.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    if ch == "\t":
        return "\\t"
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``)."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape, s)


def no_markup(text: object) -> str:
    """``printable(text)`` with Rich/Textual markup escaped, for places that parse markup."""
    # rich is a core dependency; imported late to keep `gputui --help` cheap.
    from rich.markup import escape

    return escape(printable(text))
