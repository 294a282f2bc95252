"""reStructuredText to prose, crudely and stdlib only (Django's documentation is reST).

Directives are dropped with their indented bodies (code blocks, toctrees, images), except the
admonitions and the like (``KEPT_DIRECTIVES``), whose body is kept; literal blocks (introduced by
``::``), comments, targets, substitution definitions, metadata fields, section underlines,
interpreter sessions and tables are dropped; roles and links are replaced by their text; each
paragraph is joined onto one line (lists keep a line per item).
"""
from __future__ import annotations

import re

from foxwb.workbench.data.english.text import tidy

KEPT_DIRECTIVES = {"note", "warning", "tip", "important", "caution", "attention", "seealso",
                   "versionadded", "versionchanged", "deprecated", "admonition", "hint", "danger",
                   "rubric", "topic", "sidebar", "epigraph", "highlights", "pull-quote", "glossary",
                   "only", "centered", "container"}
# Kept directives whose argument is not prose (``.. only:: html``, ``.. glossary::``).
_ARGUMENT_DROPPED = {"only", "glossary", "container"}

_DIRECTIVE = re.compile(r"\.\.\s+([A-Za-z0-9_:-]+)::\s*(.*)$")
_OPTION = re.compile(r"\s+:[\w-]+:")
_FIELD = re.compile(r"^:[\w -]+:")
_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+<>:._])\1{2,}\s*$")
_TABLE = re.compile(r"^[+|]-|^={3,}( +={3,})+$")
_LIST_ITEM = re.compile(r"^[-*+] |^#\. |^\d+\. ")

_ROLE = re.compile(r":[a-zA-Z0-9_.+-]+(?::[a-zA-Z0-9_.+-]+)*:`([^`]*)`")
_REF = re.compile(r"`([^`<]*?)\s*<[^`>]*>`_{1,2}")
_LITERAL = re.compile(r"``([^`]*)``")
_INTERPRETED = re.compile(r"`([^`]+)`_{0,2}")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])")
_SUBSTITUTION = re.compile(r"\|([^|\s][^|]*)\|_{0,2}")


def rst_to_text(source: str) -> str:
    """reStructuredText as tidied prose (see the module's docstring for what is dropped)."""
    kept = _prose_lines(source.replace("\t", "    ").split("\n"))
    return _reflow(_inline("\n".join(kept)))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _skip_block(lines: list[str], i: int, base: int) -> int:
    """The index past the blank lines and lines indented more than ``base`` from ``i`` on."""
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
        i += 1
    return i


def _prose_lines(lines: list[str]) -> list[str]:
    """The lines of prose, the block-level markup dropped."""
    out: list[str] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        s = line.strip()
        ind = _indent(line)
        m = _DIRECTIVE.match(s)
        if m:
            name = m.group(1).split(":")[-1]
            if name not in KEPT_DIRECTIVES:
                i = _skip_block(lines, i + 1, ind)
                continue
            if m.group(2) and name not in _ARGUMENT_DROPPED:
                out.append(" " * ind + m.group(2))
            i += 1
            while i < n and _OPTION.match(lines[i]):
                i += 1
        elif s.startswith(".. ") or s == "..":
            # comment, target, footnote, substitution definition: dropped with its indented body
            i = _skip_block(lines, i + 1, ind)
        elif _UNDERLINE.match(s):
            i += 1
        elif _FIELD.match(s) and (not out or not out[-1].strip()):
            # a metadata field at the start of a block
            i += 1
        elif s.endswith("::"):
            i = _literal_block(lines, i, out)
        elif s.startswith((">>> ", "$ ")):
            i += 1
        elif _TABLE.match(s):
            while i < n and lines[i].strip():
                i += 1
        else:
            out.append(line)
            i += 1
    return out


def _literal_block(lines: list[str], i: int, out: list[str]) -> int:
    """Keep the text before a ``::`` (ending in one colon), skip the indented literal block after
    it; the index of the line that follows."""
    s, ind = lines[i].strip(), _indent(lines[i])
    lead = s[:-2].rstrip()
    if lead:
        out.append(" " * ind + lead + ("" if lead.endswith(":") else ":"))
    i += 1
    j = i
    while j < len(lines) and not lines[j].strip():
        j += 1
    if j < len(lines) and _indent(lines[j]) > ind:
        return _skip_block(lines, j, ind)
    return i


def _role_text(m: re.Match) -> str:
    """The text a role shows: its title before ``<target>``, the last part of ``~a.b.c``."""
    text = m.group(1)
    titled = re.match(r"(.*?)\s*<[^>]*>$", text, re.S)
    if titled and titled.group(1):
        return titled.group(1)
    if text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    return text.lstrip("!")


def _inline(text: str) -> str:
    """Roles, links, literals, emphasis and substitutions replaced by their text."""
    text = _ROLE.sub(_role_text, text)
    text = _REF.sub(lambda m: m.group(1), text)
    text = _LITERAL.sub(lambda m: m.group(1), text)
    text = _INTERPRETED.sub(lambda m: m.group(1).split("<")[0].strip(), text)
    text = _BOLD.sub(lambda m: m.group(1), text)
    text = _EMPHASIS.sub(lambda m: m.group(1), text)
    text = _SUBSTITUTION.sub(lambda m: m.group(1), text)
    return re.sub(r"(\w)\\ ", r"\1", text)


def _reflow(text: str) -> str:
    """Each paragraph on one line, but a list (its first line an item) a line per item; tidied."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.split("\n") if line.strip()]
        if not lines:
            continue
        if len(lines) > 1 and _LIST_ITEM.match(lines[0]):
            paragraphs.append("\n".join(lines))
        else:
            paragraphs.append(" ".join(lines))
    return tidy("\n\n".join(paragraphs))
