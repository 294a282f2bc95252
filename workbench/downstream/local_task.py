"""``wb_next_line``: the downstream task shipped with the workbench, built from the trial's own
held-out documents, so it runs on every machine with no download.

An item is a place in a held-out document (foxwb.workbench.data.held_out: both of its splits,
documents training never read): the lines before it are the context (at most ``MAX_CONTEXT_CHARS`` characters of whole lines),
and the choices are its true next line and three lines drawn from other held-out documents, in an
order drawn by the seed. It is an ordinary lm-eval ``multiple_choice`` task (acc, acc_norm): its
items go to a JSON-lines file in the cache, and a task YAML (the package's template,
wb_next_line.yaml) points lm-eval at it. The items depend on the documents and the seed alone,
so every trial trained on the same data is asked the same questions, item for item.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import yaml

from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.data.atomic import write_atomically

TASK = "wb_next_line"
VERSION = 1  # of the builder: a change of how items are drawn makes new items, under a new key
ITEMS = 1000
SEED = 0
CHOICES = 4
MIN_LINE_CHARS = 8  # a line shorter than this (stripped) is neither asked for nor offered
MAX_CONTEXT_CHARS = 2000
TEMPLATE = Path(__file__).with_name("wb_next_line.yaml")


def cache_root() -> Path:
    return Path(os.environ.get("WB_EVAL_CACHE") or Path.home() / ".cache" / "fox-workbench" / "eval")


def _askable(line: str) -> bool:
    return len(line.strip()) >= MIN_LINE_CHARS


def _context(lines: list[str], i: int) -> str:
    """The whole lines before line ``i``, the last MAX_CONTEXT_CHARS characters' worth (at least one)."""
    start, size = i, 0
    while start > 0 and (size + len(lines[start - 1]) + 1 <= MAX_CONTEXT_CHARS or start == i):
        start -= 1
        size += len(lines[start]) + 1
    return "".join(line + "\n" for line in lines[start:i])


def _places(docs: list[list[str]], rng) -> list[tuple[int, int]]:
    """(document, line) of every askable line with a line before it, each document's in an order
    drawn by ``rng``, the documents taken in turn: the first items of a --limit span many documents."""
    per_doc = []
    for d, lines in enumerate(docs):
        found = [i for i in range(1, len(lines)) if _askable(lines[i]) and lines[i - 1].strip()]
        per_doc.append([(d, found[k]) for k in rng.permutation(len(found))])
    longest = max((len(p) for p in per_doc), default=0)
    return [p[k] for k in range(longest) for p in per_doc if k < len(p)]


def next_line_items(texts: list[str], seed: int = SEED, n_items: int = ITEMS) -> list[dict]:
    """Up to ``n_items`` items (id, document, line, context, choices, label) from ``texts``."""
    docs = [t.split("\n") for t in texts]
    pool = [(d, line) for d, lines in enumerate(docs) for line in dict.fromkeys(lines) if _askable(line)]
    if len({d for d, _ in pool}) < 2:
        raise SpecError(f"task {TASK}: {len({d for d, _ in pool})} of the trial's {len(texts)} held-out document(s) have lines of "
                        f"{MIN_LINE_CHARS}+ characters; the task draws the wrong choices from other documents and needs 2 or "
                        "more (raise data.val_fraction or data.max_bytes)")
    rng = np.random.default_rng([seed, VERSION])
    items = []
    for d, i in _places(docs, rng):
        if len(items) == n_items:
            break
        truth = docs[d][i]
        wrong: list[str] = []
        for _ in range(100 * CHOICES):  # bounded: other documents may hold too few distinct lines
            other, line = pool[int(rng.integers(len(pool)))]
            if other != d and line != truth and line not in wrong:
                wrong.append(line)
            if len(wrong) == CHOICES - 1:
                break
        else:
            continue
        label = int(rng.integers(CHOICES))
        choices = wrong[:label] + [truth] + wrong[label:]
        items.append({"id": len(items), "document": d, "line": i, "context": _context(docs[d], i),
                      "choices": [c + "\n" for c in choices], "label": label})
    return items


def texts_of(data) -> list[str]:
    """The trial's held-out documents (select and test splits) as text, through its tokenizer."""
    return [data.tokenizer.decode(np.asarray(doc)) for doc in data.val_docs]


def task_folder(data, seed: int = SEED, n_items: int = ITEMS) -> Path:
    """A folder holding the task's YAML and its items for ``data``'s held-out documents (built once per
    documents, seed and size, in the cache: ``$WB_EVAL_CACHE``, else ~/.cache/fox-workbench/eval)."""
    texts = texts_of(data)
    digest = hashlib.sha256(json.dumps([VERSION, seed, n_items, texts]).encode()).hexdigest()[:16]
    folder = cache_root() / f"{TASK}-{digest}"
    config = folder / f"{TASK}.yaml"
    if config.is_file():
        return folder
    items = next_line_items(texts, seed, n_items)
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(item) + "\n" for item in items)
    write_atomically(folder / "items.jsonl", lambda tmp: tmp.write_text(lines))
    task = yaml.safe_load(TEMPLATE.read_text())
    task["dataset_kwargs"] = {"data_files": {"test": str(folder / "items.jsonl")}}
    task["metadata"] = {"version": VERSION, "items_sha256": digest}
    # The YAML last: its presence says the items beside it are whole.
    write_atomically(config, lambda tmp: tmp.write_text(yaml.safe_dump(task, sort_keys=False)))
    return folder
