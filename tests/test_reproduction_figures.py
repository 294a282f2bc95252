"""Figures of docs/reproduction.md and docs/statistics.md that a science review found out of step with
their sources, recomputed here from the committed results JSON, the study file and the paper's
Table 3 as docs/fox-notes.md gives it, so that a figure cannot go stale silently: the paper's
Pro-pair gap the scale ladder is set against, the LLaMA study's GPU time, the seeds Welch's power
analysis asks of Transformer (LLaMA), the context study's seeds for a 2% perplexity difference, the
ladder study file's own summary, and the ladder's Holm-adjusted p."""
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from foxwb.workbench.analysis import stats

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
SIZES = ("XS", "S", "M", "L", "XL")


def flat(text: str) -> str:
    """A page's text with each run of whitespace (line breaks included) as one space: a sentence
    reads the same however the page wraps it."""
    return re.sub(r"\s+", " ", text)


def results(path: str) -> dict[str, dict]:
    """The rows of a `wb results --format json` file by row name."""
    return {r["row"]: r for r in json.loads((EXPERIMENTS / path).read_text())["rows"]}


def section(page: str, heading: str) -> str:
    """The text of one `### ` or `## ` section of a page, up to the next heading."""
    start = page.index(heading)
    end = page.find("\n#", start + len(heading))
    return page[start:end if end > 0 else None]


@pytest.fixture(scope="module")
def reproduction() -> str:
    return (ROOT / "docs" / "reproduction.md").read_text()


@pytest.fixture(scope="module")
def ladder() -> dict[str, dict]:
    return results("scaling_ladder/scaling_fox_vs_transformer.json")


def ladder_lead(ladder: dict[str, dict], size: str) -> float:
    """Transformer (Pro)'s val_ppl over FoX (Pro)'s at one size, paired over the seeds, as a share
    of FoX (Pro)'s mean: the ladder table's percentage."""
    return ladder[f"Transformer (Pro) [size={size}]"]["paired_delta"] / ladder[f"FoX (Pro) [size={size}]"]["mean"]


def test_the_paper_gap_the_ladder_is_set_against(reproduction, ladder):
    """M1: the paper's Table 3 Pro pair, as docs/fox-notes.md gives it, and the claim that it lies in
    the range of the ladder's two largest sizes."""
    notes = (ROOT / "docs" / "fox-notes.md").read_text()

    def ppl(row: str) -> float:
        return float(re.search(rf"^\| {re.escape(row)} \|.*\| ([\d.]+) \|$", notes, re.M).group(1))

    fox, transformer = ppl("FoX (Pro) (+ KV-shift)"), ppl("Transformer (Pro) (FoX (Pro) - forget gate + RoPE)")
    gap = transformer / fox - 1
    text = flat(reproduction)
    assert f"its Table 3: {fox:.2f} against {transformer:.2f}, {gap:.1%})" in text
    large, xl = ladder_lead(ladder, "L"), ladder_lead(ladder, "XL")
    assert f"(L +{large:.1%}, XL +{xl:.1%})" in text
    assert min(large, xl) <= gap <= max(large, xl), "the paper's gap no longer lies in the ladder's top-end range"
    assert "lies in that range" in text


def test_the_llama_study_gpu_time_is_its_items_sum(reproduction):
    """M2: the section's total is the sum of its own items, whose trials are the JSON's."""
    text = flat(section(reproduction, "### The LLaMA rows on the seeds they ask"))
    total, items = re.search(r"\*\*about ([\d,]+) s of GPU wall time\*\* \(([^)]*)\)", text).groups()
    seconds = [int(s.replace(",", "")) for s in re.findall(r"([\d,]+) s\b", items)]
    trials = [int(a or b) for a, b in re.findall(r"(?:first|next|last) (\d+)|the (\d+) after", items)]
    assert len(seconds) == len(trials) == 6, items
    assert sum(trials) == sum(r["n_seeds"] for r in results("table3_4096_llama/table3_4096_llama.json").values())
    assert int(total.replace(",", "")) == round(sum(seconds), -1)
    assert f"its LLaMA rows on the seeds they ask, about {total} s" in flat(reproduction)


def test_the_seeds_welch_asks_of_transformer_llama(reproduction):
    """M3: the seeds Welch's power analysis asks of Transformer (LLaMA) for 2% of FoX (Pro)'s mean
    against FoX (Pro)'s 27, from its first 24, 108 and 202 seeds and from all 251, and the paired
    design's ask from the first 24."""
    rows = results("table3_4096_llama/table3_4096_llama.json")
    transformer = dict(zip(rows["Transformer (LLaMA)"]["seeds_run"], rows["Transformer (LLaMA)"]["values"]))
    fox = dict(zip(rows["FoX (Pro)"]["seeds_run"], rows["FoX (Pro)"]["values"]))
    fox_values = np.array(list(fox.values()))
    effect = 0.02 * fox_values.mean()

    def first(n: int) -> np.ndarray:
        return np.array([transformer[s] for s in range(n)])

    def asks(n: int) -> int:
        return stats.seeds_needed_welch(effect, first(n).std(ddof=1), fox_values.std(ddof=1), len(fox)).n

    n24, n108, n202, n251 = asks(24), asks(108), asks(202), asks(251)
    assert (len(fox), len(transformer)) == (27, 251)
    assert (n108, n202) == (202, 251)  # the counts the study ran to
    sd24, sd108, sd202 = (first(n).std(ddof=1) for n in (24, 108, 202))
    paired = stats.seeds_needed_paired(effect, np.std([transformer[s] - fox[s] for s in range(24)], ddof=1)).n
    text = flat(reproduction)
    for phrase in (
        f"a paired test asked {paired} seeds of both",
        f"Welch's power analysis asks {n24} of it alone against FoX (Pro)'s 27 from its first 24 seeds "
        f"(sd {sd24:.3f}) and {n108} from its first 108 (sd {sd108:.3f};",
        f"| {n24} of it from its first 24 seeds, {n108} from its first 108 (which ran), then {n202} from those "
        f"{n108} (0.79 at the 251 runs' spread, which asks {n251}) |",
        f"so the {n108} asked from the first 108 detect",
        f"({n24} against FoX (Pro)'s 27: {n24 - 24} trials more)",
        f"and {n24}-{n251} for 2% of FoX (Pro)'s mean",
        f"From its first 24 seeds (sd {sd24:.3f}) Welch's power analysis asks {n24} of them for 2% of FoX (Pro)'s "
        f"mean against FoX (Pro)'s 27, and from its first 108 (sd {sd108:.3f}) {n108}, which ran; their spread "
        f"grew with them (sd {sd202:.3f} over the {n108}), and the same analysis from the {n108} asks {n202}",
    ):
        assert phrase in text, phrase
    statistics = flat((ROOT / "docs" / "statistics.md").read_text())
    assert (f"from its first 24 seeds, {n24} of Transformer (LLaMA) against FoX (Pro)'s 27 ({n108} from its first "
            f"108, the count the study ran to), where the paired design asked {paired} of both") in statistics
    for stale in ("asked 202 of it alone", "202 of it from its first 24", "asked 202 of them",
                  "from its first 24 seeds, 202 of Transformer", "202 asked from the first 24", "202-256"):
        assert stale not in text and stale not in statistics, stale


def test_the_context_study_seeds_for_2_percent(reproduction):
    """M4: each cell's seeds for a 2% perplexity difference (log 1.02 nats) at 80% power from the
    seven seeds' paired spread, and the power the seven have, as the table's note defines them;
    every cell within a seed and 0.015 of power, the LLaMA pair at 4096 exactly."""
    sources = {"LLaMA": ("context_length/context_length.json", "FoX (LLaMA)"),
               "Pro": ("context_length/context_length_pro.json", "FoX (Pro)")}
    table = section(reproduction, "## Context length")
    assert "a paired t-test's seeds for a 2% perplexity difference at 80% power" in flat(table)
    cells = re.findall(r"^\| (\d+) \| (LLaMA|Pro) \|.*\| (> 1000|\d+) \((\d\.\d+)\) \|$", table, re.M)
    assert len(cells) == 6, cells
    effect = stats.loss_effect_of_ppl_fraction(0.02)
    for context, pair, seeds, power in cells:
        path, row = sources[pair]
        r = results(path)[f"{row} [context={context}]"]
        assert r["paired_n"] == 7
        needed = stats.seeds_needed_paired(effect, r["paired_sd"])
        now = stats.power_paired(effect, r["paired_sd"], 7)
        where = f"{pair} at {context}: the doc's {seeds} ({power}), computed {needed} ({now:.2f})"
        if seeds == "> 1000":
            assert needed.exceeds_cap, where
        else:
            assert not needed.exceeds_cap and abs(int(seeds) - needed.n) <= 1, where
        assert abs(float(power) - now) <= 0.015, where
        if (context, pair) == ("4096", "LLaMA"):
            assert f"{seeds} ({power})" == f"{needed} ({now:.2f})", where


def test_the_ladder_study_file_says_what_it_runs():
    """M5: the header comment and `description` give the tokens per parameter and seeds the fields do."""
    path = EXPERIMENTS / "scaling_ladder" / "scaling_fox_vs_transformer.yaml"
    raw = path.read_text()
    study = yaml.safe_load(raw)
    tokens, seeds = study["design"]["tokens_per_param"], len(study["seeds"])
    header = flat(" ".join(line.lstrip("# ") for line in raw.split("\nname:")[0].splitlines()))
    assert f"tokens {tokens:g} x the non-embedding parameters, {seeds} seeds" in header
    assert f"{tokens:g} tokens per parameter, {seeds} seeds" in flat(study["description"])


def test_the_ladder_significance_is_holm_adjusted(reproduction, ladder):
    """M6: the ladder's Holm-adjusted p over its five sizes, as the JSON records them and as
    stats.holm gives them from the unadjusted p, and which sizes stay under 0.05."""
    rows = [ladder[f"Transformer (Pro) [size={size}]"] for size in SIZES]
    raw = [r["p_value"] for r in rows]
    adjusted = [r["p_holm"] for r in rows]
    assert stats.holm(raw) == pytest.approx(adjusted, rel=1e-9)
    significant = [size for size, p in zip(SIZES, adjusted) if p < 0.05]
    unadjusted = [size for size, p in zip(SIZES, raw) if p < 0.05]
    assert (significant, unadjusted) == (["XS"], ["XS", "S", "XL"])
    text = flat(reproduction)
    holm = ", ".join(f"{size} {p:.2g}" for size, p in zip(SIZES, adjusted))
    assert f"only at XS is the lead significant after Holm's correction over the five sizes (`p_holm` in the JSON: {holm})" in text
    assert (f"Unadjusted, XS, S and XL are under 0.05 ("
            + ", ".join(f"{p:.3f}" for size, p in zip(SIZES, raw) if size in unadjusted) + ")") in text
    for size, p in zip(SIZES, adjusted):
        assert re.search(rf"^\| {size} \| .* \| {p:.2g} \|$", reproduction, re.M), size
    assert "significant at XS, S and XL" not in text


def claims_table():
    """scripts/claims_table.py, imported from its file (scripts/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("claims_table", ROOT / "scripts" / "claims_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_claims_table_is_what_the_committed_exports_give(reproduction):
    """The English claims table and its cost line, as scripts/claims_table.py builds them from each
    study's `wb results --format json` export and the GPU calls' log, stand on the page as they are."""
    lines, cost = claims_table().rows()
    start = reproduction.index("<!-- claims table: python scripts/claims_table.py -->\n")
    end = reproduction.index("<!-- end of the claims table -->")
    block = reproduction[start:end].split("\n", 1)[1].strip()
    assert block == "\n".join(lines) + "\n\n" + "\n".join(cost)


def test_the_claims_prose_figures(reproduction):
    """The figures the English claims section's prose gives beside its table: each row's lr choice,
    the windows' and the full-attention Transformer's test perplexity, the stopped run's trials, and
    the cost split between decided claims and the stopped run."""
    page = flat(section(reproduction, "## The paper's claims on English prose"))
    table3, gates = results("claims_nl/claims_table3.json"), results("claims_nl/claims_gate_kinds.json")
    confirmed = [r for r in table3.values() if not r.get("search_point")]
    assert len(confirmed) == 4 and {r["chosen"] for r in confirmed} == {"lr=0.002"}
    assert "all four chose lr 0.002" in page
    w64, w256 = gates["Transformer (Pro) window 64"]["mean"], gates["Transformer (Pro) window 256"]["mean"]
    full = table3["Transformer (Pro)"]["mean"]
    assert f"test perplexity {w64:.2f} against {w256:.2f} at 256" in page
    assert f"Transformer (Pro) has {full:.2f} in `claims_table3`" in page
    log = (EXPERIMENTS / "claims_nl" / "gpu-calls.log").read_text()
    stopped = re.findall(r"study 'claims_pro_parts': (\d+) trials; 0 trials were already done; (\d+) finished now", log)
    assert stopped == [("49", "36")] and "36 of its first look's 49 trials done" in page
    cost = claims_table().gpu_seconds()
    decided = cost["claims_table3"][0] + cost["claims_gate_kinds"][0]
    total = sum(s for s, _, _ in cost.values())
    assert f"{total} GPU-seconds, {total / 60:.1f} H100-minutes: {decided} s for the six decided claims and " \
           f"{cost['claims_pro_parts'][0]} s for the stopped run" in page
    decided_claims = [c for study in ("claims_table3", "claims_gate_kinds")
                      for c in json.loads((EXPERIMENTS / "claims_nl" / f"{study}.json").read_text())["claims"]]
    assert len(decided_claims) == 6 and all(c["verdict"] in ("better", "equivalent") for c in decided_claims)
