"""Per-item results of an lm-eval task, kept with the trial: ``TRIAL/eval/<task>.jsonl`` (one line
per item) and ``TRIAL/eval/<task>.json`` (the task's metrics with lm-eval's stderr), both written
atomically (a Ctrl-C leaves the old file or the new one, never half of one)."""
from __future__ import annotations

import json
import math
from pathlib import Path

from foxwb.workbench.data.atomic import write_atomically

EVAL_DIR = "eval"  # in a trial's folder
# The 0/1 metric an item is "correct" by, the first the task has.
CORRECT_BY = ("acc", "exact_match")


def _plain(value):
    """A metric's value as JSON holds it (lm-eval keeps some as tuples, e.g. (loglikelihood, words))."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


def item_record(sample: dict) -> dict:
    """One line of the per-item file from one of lm-eval's logged samples: doc id and hash, target,
    the model's choice and its log-likelihoods (multiple choice), its log-likelihood (one
    continuation), or its text (generation), each metric's value, and ``correct`` 0/1 where the task
    has a 0/1 metric (acc, exact_match)."""
    names = [m for m in sample.get("metrics", []) if m in sample]
    record = {"doc_id": sample["doc_id"], "doc_hash": sample.get("doc_hash"), "filter": sample.get("filter"),
              "target": _plain(sample.get("target"))}
    resps = sample.get("filtered_resps", [])
    if resps and all(isinstance(r, (list, tuple)) and len(r) == 2 for r in resps):
        lls = [float(r[0]) for r in resps]  # (loglikelihood, is_greedy) per choice
        if len(lls) > 1:
            record |= {"choice": max(range(len(lls)), key=lls.__getitem__), "loglikelihoods": lls}
        else:
            record |= {"loglikelihood": lls[0], "greedy": bool(resps[0][1])}
    elif resps and all(isinstance(r, str) for r in resps):
        record["response"] = resps[0]
    elif resps and all(isinstance(r, (int, float)) for r in resps):
        record["loglikelihood"] = float(resps[0])  # a rolling log-likelihood (perplexity tasks)
    correct = next((sample[m] for m in CORRECT_BY if m in names), None)
    if correct is not None:
        record["correct"] = int(round(float(correct)))
    return record | {"metrics": {m: _plain(sample[m]) for m in names}}


def task_metrics(found: dict) -> dict:
    """lm-eval's result for one task (``"acc,none": ...``, ``"acc_stderr,none": ...``) as {metric: value}
    for its first filter, stderr as ``<metric>_stderr``."""
    out = {}
    for key, value in found.items():
        if "," not in key or not isinstance(value, (int, float)):
            continue
        name, _ = key.split(",", 1)
        out.setdefault(name, None if isinstance(value, float) and not math.isfinite(value) else value)
    return out


def paths(folder: Path, task: str) -> tuple[Path, Path]:
    """(per-item file, metrics file) of ``task`` in a trial's eval folder."""
    return folder / f"{task}.jsonl", folder / f"{task}.json"


def write(folder: Path, task: str, records: list[dict], summary: dict) -> None:
    """The per-item file first, then the metrics: a metrics file on disk says its items are whole."""
    folder.mkdir(parents=True, exist_ok=True)
    items, metrics = paths(folder, task)
    text = "".join(json.dumps(r) + "\n" for r in records)
    write_atomically(items, lambda tmp: tmp.write_text(text))
    write_atomically(metrics, lambda tmp: tmp.write_text(json.dumps(summary, indent=1)))


def read_items(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def recorded_limit(folder: Path, task: str) -> tuple[bool, int | None]:
    """(whether ``task`` has a metrics file in the eval folder ``folder``, the --limit it was
    evaluated at)."""
    _, metrics = paths(folder, task)
    if not metrics.is_file():
        return False, None
    return True, json.loads(metrics.read_text()).get("limit")


def replacing(folder: Path, names: list[str], limit: int | None) -> list[str]:
    """A sentence for each task of ``names`` evaluated at another --limit, whose files in the eval
    folder ``folder`` this evaluation replaces."""
    said = []
    for task in names:
        done, was = recorded_limit(folder, task)
        if done and was != limit:
            said.append(f"{task}: replacing its evaluation at --limit {was if was is not None else '(none)'} "
                        f"with this one at --limit {limit if limit is not None else '(none)'}")
    return said
