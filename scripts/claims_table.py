"""The claims table of docs/reproduction.md ("The paper's claims on English prose"), from what the
claims studies committed: each study's `wb results --format json` export in experiments/claims_nl/
(the claims, their verdicts, effects, intervals and seeds) and the log of the GPU calls that ran
them (`bash benchmarks/gpu.sh claims` writes a line per `wb run` with its wall time and GPU).
Prints the Markdown table, then the cost per study and in all, then each study's fairness report
in a line (each row's choice, the grid, its flags); tests/test_reproduction_figures.py
checks that the page carries this output as it is.

    python scripts/claims_table.py
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "experiments" / "claims_nl"
LOG = FOLDER / "gpu-calls.log"
# The studies in the table's order, each with its claims in its file's order.
STUDIES = ("claims_table3", "claims_pro_parts", "claims_gate_kinds", "claims_context", "claims_acp")
# The paper's figure behind each claim (docs/fox-notes.md, "Table 3"; the study files' comments).
PAPER = {
    "FoX (Pro) beats Transformer (Pro)": "6.62 vs 6.82 (3.0%)",
    "FoX (LLaMA) beats Transformer (LLaMA)": "7.25 vs 7.49 (3.3%)",
    "a data-dependent gate beats a bias-only one": "Figure 7: ahead (curves, no number)",
    "a bias-only gate beats a fixed one": "Figure 7: ahead (curves, no number)",
    "FoX (Pro) beats a window of 256": "not in the paper (a recency control)",
    "FoX (Pro) beats a window of 64": "not in the paper (a recency control)",
    "QK-norm helps": "6.62 vs 6.79 (2.6%)",
    "the output gate helps": "6.62 vs 6.86 (3.6%)",
    "the output norm helps": "6.62 vs 6.69 (1.1%)",
    "KV-shift helps": "6.62 vs 6.80 (2.7%)",
    "the forget gate helps": "6.62 vs 7.40 (11.8%)",
    "RoPE adds nothing to FoX (Pro)": "6.63 vs 6.62 (+0.15%)",
    "FoX (Pro) beats Transformer (Pro) at 1024": "the lead grows with the context (no number)",
    "FoX (Pro) beats Transformer (Pro) at 2048": "the lead grows with the context (no number)",
    "FoX (Pro) beats Transformer (Pro) at 4096": "the lead grows with the context (no number)",
    "pruning leaves what FoX (Pro) learns unchanged": "no loss in quality (the ACP paper)",
}
_ENDED = re.compile(r"^== (\S+) ended rc (\d+) \S+: (\d+) s of wb run on (.+)$")


def gpu_seconds(log: Path = LOG) -> dict[str, tuple[int, set[str], bool]]:
    """study -> (seconds of wb run summed over the calls, the GPUs, whether its last run finished).
    A run finished when its `wb run` exited 0 or printed that every claim was decided: a call's time
    limit may stop the driver in Ray's shutdown after the plan has stopped (rc 124)."""
    out: dict[str, tuple[int, set[str], bool]] = {}
    decided = False
    for line in log.read_text().splitlines() if log.exists() else []:
        if line.startswith("== ") and " ended rc " not in line:
            decided = False
        elif "every claim decided" in line:
            decided = True
        m = _ENDED.match(line)
        if m:
            name, rc, seconds, gpu = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4).strip()
            total, gpus, _ = out.get(name, (0, set(), False))
            out[name] = (total + seconds, gpus | {gpu}, rc == 0 or decided)
    return out


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def rows(folder: Path = FOLDER, log: Path = LOG) -> tuple[list[str], list[str]]:
    """The table's Markdown lines and the cost lines."""
    cost = gpu_seconds(log)
    lines = ["| claim | the paper | sesoi | verdict | effect on test perplexity, interval | seeds | study, GPU time |",
             "|---|---|---|---|---|---|---|"]
    for study in STUDIES:
        seconds, gpus, finished = cost.get(study, (0, set(), False))
        spent = f"{seconds} s" if seconds else "not run"
        export = folder / f"{study}.json"
        if not export.exists():
            state = "not run" if not seconds else "stopped mid-way, not decided (to run again)"
            lines.append(f"| {study}: every claim | | | {state} | | | `{study}`, {spent} |")
            continue
        for c in json.loads(export.read_text())["claims"]:
            lo, hi = c["ci95"]
            effect = f"{_pct(c['delta'])} [{_pct(lo)}, {_pct(hi)}] ({100 * c['ci_level']:.1f}%)"
            lines.append(f"| {c['name']} | {PAPER.get(c['name'], '')} | {100 * c['sesoi']:g}% | **{c['verdict']}** | "
                         f"{effect} | {c['n_seeds']} | `{study}`, {spent} |")
    total = sum(s for s, _, _ in cost.values())
    gpus = sorted(set().union(*(g for _, g, _ in cost.values()))) if cost else []
    notes = [f"{study}: {s} s ({s / 60:.1f} min){'' if done else ', stopped mid-way'}" for study, (s, _, done) in cost.items()]
    cost_lines = [f"GPU time, the wall time of each study's `wb run` on one {', '.join(gpus) or 'GPU'}: " + "; ".join(notes)
                  + f"; in all {total} s ({total / 60:.1f} GPU-minutes)"]
    return lines, cost_lines


def _value(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _knobs(values: dict) -> str:
    """``{"train.lr": 0.002}`` as ``lr 0.002``: each knob by its last name."""
    return ", ".join(f"{k.rsplit('.', 1)[-1]} {_value(v)}" for k, v in values.items())


def fairness(folder: Path = FOLDER) -> list[str]:
    """A line per study that ran: each row's choice of its searched knobs, the grid, and the fairness
    report's flags (a choice at the grid's edge, a knob one row sets that others leave unsearched)."""
    out = []
    for study in STUDIES:
        export = folder / f"{study}.json"
        if not export.exists():
            continue
        report = json.loads(export.read_text())["fairness"]
        choices, grids = [], set()
        for row in report["rows"]:
            choice, knobs = _knobs(row["choice"] or {}), _knobs(row["knobs"])
            choices.append(f"{row['row']}{' ' + choice if choice else ''}" + (f" (set: {knobs})" if knobs else ""))
            grids |= {f"{k.rsplit('.', 1)[-1]} in {{{', '.join(_value(x) for x in xs)}}}" for k, xs in row["searched"].items()}
        flags = "; ".join(flag["text"] for flag in report["flags"]) or "none (no choice at the grid's edge, no knob unsearched)"
        if grids:
            out.append(f"- `{study}`: searched {', '.join(sorted(grids))} on seed 0, each row on its own; "
                       f"chose {'; '.join(choices)}; flags: {flags}")
        else:
            out.append(f"- `{study}`: nothing searched, every row at the study file's recipe: {'; '.join(choices)}; "
                       f"flags: {flags}")
    return out


def text(folder: Path = FOLDER, log: Path = LOG) -> str:
    """What the page carries between its markers: the table, the cost line, the fairness lines."""
    lines, cost = rows(folder, log)
    return "\n".join([*lines, "", *cost, "", "The fairness report of each study (`wb results`' \"fairness\"):", "",
                      *fairness(folder)])


def main() -> int:
    # No arguments: --help prints what this is, and anything else is refused rather than ignored.
    argparse.ArgumentParser(description=__doc__.strip().splitlines()[0],
                            epilog="Reads experiments/claims_nl/*.json and gpu-calls.log; prints Markdown.").parse_args()
    print(text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
