"""C++/CUDA source text as the compiler reads it, for the host's scans of a candidate's extension.

The scans look for names (`at::relu(`, `.add(`, dispatcher tricks) in code, not in comments. Dropping comments
needs the literals too: a comment starts only outside a string, so `"/*"; at::relu(x); "*/"` is code between two
strings, not a comment (a regex that knew no literals read it as one and hid the call; redteam15). The lexer follows
the compiler's own phases as far as comments depend on them: line splices first, then string, character and raw
string literals, and numbers with digit separators (`1'000` is no character literal). Where it cannot tell, it keeps
text: a comment it misses is an extra finding, never code hidden. One pass, linear in the text.
"""

from __future__ import annotations

import re

SPLICE = re.compile(r"\\\r?\n")  # phase 2: a backslash ending a line joins it to the next
TOKEN = re.compile(
    r"(?P<raw>(?<!\w)(?:u8|[uUL])?R\"(?P<delim>[^ ()\\\t\v\f\n]{0,16})\()"  # R"delim( ... )delim"
    r"|(?P<line>//)|(?P<block>/\*)"
    r"|(?P<string>\"(?:[^\"\\\n]|\\.)*\"?)"  # a string (an unterminated one ends at its line's end)
    r"|(?<![\w.])\.?\d(?:'(?=\w)|[eEpP][+-]|[\w.])*"  # a number: 0x1'F, 1e+5, 1'000.5f
    r"|(?P<char>'(?:[^'\\\n]|\\.)*'?)",  # a character literal
    re.S,
)


def strip_c_comments(text: str) -> str:
    """The text with its comments replaced by a space each, as the compiler sees it; literals kept as written. A `/*`
    with no end is kept and the scan goes on past it, an unterminated raw string keeps the rest of the text (the
    compiler rejects both)."""
    return _lexed(text, literals=True)


def code_only(text: str) -> str:
    """As `strip_c_comments`, with every string and character literal emptied (`""`, `''`): the code alone, for a
    scan whose marks (`##`) mean nothing inside a literal."""
    return _lexed(text, literals=False)


def _lexed(text: str, literals: bool) -> str:
    text = SPLICE.sub("", text)
    kept: list[str] = []
    position, closable = 0, True
    while match := TOKEN.search(text, position):
        if match["line"] or match["block"]:
            kept.append(text[position : match.start()])
            if match["line"]:
                end = text.find("\n", match.end())
                position = len(text) if end == -1 else end
            elif not closable or (end := text.find("*/", match.end())) == -1:
                closable = False  # no `*/` follows this one, so none follows a later one: never searched again
                kept.append("/*")
                position = match.end()
                continue
            else:
                position = end + 2
            kept.append(" ")
        elif match["raw"] is not None:
            closing = f'){match["delim"]}"'
            end = text.find(closing, match.end())
            if end == -1:
                kept.append(text[position:])
                return "".join(kept)
            kept.append(text[position : end + len(closing)] if literals else text[position : match.start()] + '""')
            position = end + len(closing)
        elif not literals and (match["string"] or match["char"]):
            kept.append(text[position : match.start()] + ('""' if match["string"] else "''"))
            position = match.end()
        else:
            kept.append(text[position : match.end()])
            position = match.end()
    kept.append(text[position:])
    return "".join(kept)
