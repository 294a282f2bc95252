"""Plain text from HTML and reStructuredText, and whitespace tidied the one way every source shares.

Stdlib only (``html.parser``). What is dropped, and why: page chrome (navigation, sidebars, tables
of contents), code blocks and tables, scripts and styles, so that what is left is prose.
"""
from __future__ import annotations

import re
from html.parser import HTMLParser

_BLANKS = re.compile(r"[ \t\r\f\v]+")
BLOCK = {"p", "div", "section", "article", "br", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3",
         "h4", "h5", "h6", "table", "tr", "blockquote", "hr", "title", "figure", "figcaption",
         "header", "footer", "main", "aside", "nav", "caption", "tbody", "thead"}
VOID = {"br", "hr", "img", "meta", "link", "input", "col", "area", "base", "wbr", "source"}
# Blocks set off by an empty line when they open (the others by a line break) ...
_PARAGRAPH_OPEN = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "dt", "table", "pre"}
# ... and when they close.
_PARAGRAPH_CLOSE = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table"}
ALWAYS_DROPPED = {"script", "style", "head", "noscript", "svg", "math", "button", "form"}
SPLIT = "\x1e"


def tidy(text: str) -> str:
    """Whitespace normalised: no-break spaces as spaces, runs of blanks inside a line collapsed,
    line ends stripped, at most one empty line between paragraphs, one newline at the end."""
    text = text.replace("\u00a0", " ").replace("\r\n", "\n").replace("\r", "\n")
    out, blank = [], 0
    for line in (_BLANKS.sub(" ", raw).strip() for raw in text.split("\n")):
        if not line:
            blank += 1
            continue
        if out and blank:
            out.append("")
        out.append(line)
        blank = 0
    return "\n".join(out).strip() + "\n"


class HTMLText(HTMLParser):
    """HTML to plain text. Drops ``<script>``, ``<style>``, ``<head>`` (and the rest of
    ``ALWAYS_DROPPED``), ``<pre>`` code blocks unless ``keep_pre``, and any element whose class
    list meets ``drop_classes``, whose id is in ``drop_ids`` or whose tag is in ``drop_tags``.
    With ``main_classes``, only text inside an element of one of those classes (or
    ``role=main``, or ``<main>``) is kept, so page chrome disappears. Each tag of ``split_tags``
    opens with a ``SPLIT`` marker, where ``split_merge`` may cut the page into documents."""

    def __init__(self, drop_classes=(), drop_tags=(), keep_pre=False, main_classes=None, drop_ids=(),
                 split_tags=()):
        super().__init__(convert_charrefs=True)
        self.split_tags = set(split_tags)
        self.out: list[str] = []
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, dropped, main)
        self.drop_depth = 0
        self.main_depth = 0
        self.drop_classes = set(drop_classes)
        self.drop_ids = set(drop_ids)
        self.drop_tags = ALWAYS_DROPPED | set(drop_tags) | (set() if keep_pre else {"pre"})
        self.main_classes = set(main_classes) if main_classes else None

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            if tag in BLOCK and not self.drop_depth:
                self.out.append("\n")
            return
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        drop = tag in self.drop_tags or bool(classes & self.drop_classes) or a.get("id") in self.drop_ids
        main = self.main_classes is not None and (
            bool(classes & self.main_classes) or a.get("role") == "main" or tag == "main")
        if tag in self.split_tags and not self.drop_depth:
            self.out.append(f"\n{SPLIT}\n")
        self.stack.append((tag, drop, main))
        self.drop_depth += drop
        self.main_depth += main
        if tag in BLOCK and not self.drop_depth:
            self.out.append("\n\n" if tag in _PARAGRAPH_OPEN else "\n")

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        # HTML is often unbalanced (<p> without </p>, <li> ...): close up to the matching tag
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                for _, drop, main in self.stack[i:]:
                    self.drop_depth -= drop
                    self.main_depth -= main
                del self.stack[i:]
                break
        else:
            return
        if tag in BLOCK and not self.drop_depth:
            self.out.append("\n\n" if tag in _PARAGRAPH_CLOSE else "\n")

    def handle_data(self, data):
        if self.drop_depth or (self.main_classes is not None and not self.main_depth):
            return
        in_pre = any(tag == "pre" for tag, _, _ in self.stack)
        self.out.append(data if in_pre else data.replace("\n", " "))

    def text(self) -> str:
        """The text collected so far, not yet tidied."""
        return "".join(self.out)


def decode_html(data: bytes) -> str:
    """HTML bytes as text, in the charset its first 2 KiB declare (UTF-8 when none or unknown);
    undecodable bytes become U+FFFD."""
    m = re.search(rb'charset=["\']?([A-Za-z0-9_-]+)', data[:2048])
    encoding = m.group(1).decode() if m else "utf-8"
    try:
        return data.decode(encoding, "replace")
    except LookupError:
        return data.decode("utf-8", "replace")


def html_to_text(data: str | bytes, **options) -> str:
    """HTML (text or bytes) as tidied plain text; ``options`` go to ``HTMLText``. With
    ``split_tags`` the text is returned untidied, its ``SPLIT`` markers in place, for
    ``split_merge``. Sphinx's header-link pilcrows are removed."""
    if isinstance(data, bytes):
        data = decode_html(data)
    parser = HTMLText(**options)
    parser.feed(data)
    parser.close()
    text = parser.text().replace("\u00b6", "")
    return text if options.get("split_tags") else tidy(text)


def split_merge(text: str, min_bytes: int = 8192, sep: str = SPLIT) -> list[str]:
    """``text`` cut at ``sep`` markers, and the consecutive pieces merged until each holds at least
    ``min_bytes`` bytes (UTF-8); a short last piece (under ``min_bytes // 2``) joins the one before
    it. Each piece is tidied; empty ones are dropped."""
    pieces = [p for p in (tidy(p) for p in text.split(sep)) if p.strip()]
    out, current = [], ""
    for piece in pieces:
        current = current + "\n" + piece if current else piece
        if len(current.encode()) >= min_bytes:
            out.append(current)
            current = ""
    if current:
        if out and len(current.encode()) < min_bytes // 2:
            out[-1] = out[-1] + "\n" + current
        else:
            out.append(current)
    return out
