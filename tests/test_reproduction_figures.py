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
    """The English claims table, its cost line and each study's fairness line, as
    scripts/claims_table.py builds them from each study's `wb results --format json` export and the
    GPU calls' log, stand on the page as they are."""
    start = reproduction.index("<!-- claims table: python scripts/claims_table.py -->\n")
    end = reproduction.index("<!-- end of the claims table -->")
    block = reproduction[start:end].split("\n", 1)[1].strip()
    assert block == claims_table().text()


def claims(study: str) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads((EXPERIMENTS / "claims_nl" / f"{study}.json").read_text())["claims"]}


def test_the_claims_prose_figures(reproduction):
    """The figures the English claims section's prose gives beside its table: the lr choices, the
    test perplexities behind the parts' and the contexts' verdicts, the spikes, which context
    intervals overlap, pruning's speed and kept share, and the cost split."""
    page = flat(section(reproduction, "## The paper's claims on English prose"))
    studies = ("claims_table3", "claims_pro_parts", "claims_gate_kinds", "claims_context")
    choices = [row["choice"] for study in studies
               for row in json.loads((EXPERIMENTS / "claims_nl" / f"{study}.json").read_text())["fairness"]["rows"]]
    assert len(choices) == 23 and all(c == {"train.lr": 0.002} for c in choices)
    assert "Every searched row of every study chose lr 0.002" in page

    table3, gates = results("claims_nl/claims_table3.json"), results("claims_nl/claims_gate_kinds.json")
    w64, w256 = gates["Transformer (Pro) window 64"]["mean"], gates["Transformer (Pro) window 256"]["mean"]
    assert f"test perplexity {w64:.2f} against {w256:.2f} at 256" in page
    assert f"Transformer (Pro) has {table3['Transformer (Pro)']['mean']:.2f} in `claims_table3`" in page

    parts = results("claims_nl/claims_pro_parts.json")
    pro, nogate, nonorm = (parts[r] for r in ("FoX (Pro)", "FoX (Pro) - forget gate", "FoX (Pro) - output norm"))
    assert all(parts[r]["n_seeds"] == 7 for r in parts if "[" not in r) and "7 seeds a row ran" in page
    assert f"reaches test perplexity {nogate['mean']:.2f} against {pro['mean']:.2f}, and all of its runs spike" in page
    assert nogate["runs_spiked"] == nogate["n_seeds"]
    assert f"FoX (Pro) without it reaches {nonorm['mean']:.2f} against {pro['mean']:.2f}" in page
    nogate_gate = parts["FoX (Pro) - output gate"]["n_params"]
    assert f"{nogate_gate:,} parameters against {pro['n_params']:,} ({100 * (1 - nogate_gate / pro['n_params']):.1f}% fewer)" in page
    assert all(parts[r]["loss_spikes"] == 0 for r in parts) and nogate["grad_spikes"] == nogate["n_seeds"]
    qk = parts["FoX (Pro) - QK-norm"]
    assert f"on all 7 seeds the rows ran, the paired difference in test perplexity is {qk['paired_delta']:+.3f} +- " \
           f"{qk['paired_ci95']:.3f}, the 95% interval, against FoX (Pro)'s {pro['mean']:.2f}" in page
    verdicts = {name: c["verdict"] for name, c in claims("claims_pro_parts").items()}
    assert verdicts["QK-norm helps"] == "equivalent" and verdicts["the output norm helps"] == "worse"

    context = results("claims_nl/claims_context.json")
    t = [context[f"Transformer (Pro) {c}"] for c in (1024, 2048, 4096)]
    f = [context[f"FoX (Pro) {c}"] for c in (1024, 2048, 4096)]
    assert f"rises from {t[0]['mean']:.2f} to {t[1]['mean']:.2f} and {t[2]['mean']:.2f} with the context, and " \
           f"{sum(r['runs_spiked'] for r in t)} of its {sum(r['n_seeds'] for r in t)} runs spike (gradient-norm " \
           f"spikes), against " \
           f"{f[0]['mean']:.2f}, {f[1]['mean']:.2f} and {f[2]['mean']:.2f} for FoX (Pro) with no spike" in page
    assert sum(r["runs_spiked"] for r in f) == 0
    ci = [claims("claims_context")[f"FoX (Pro) beats Transformer (Pro) at {c}"]["ci95"] for c in (1024, 2048, 4096)]
    assert ci[0][1] < ci[2][0] or ci[2][1] < ci[0][0]  # 1024 and 4096 apart
    assert ci[1][0] <= ci[2][1] and ci[2][0] <= ci[1][1]  # 2048 and 4096 overlap
    assert ci[0][0] <= ci[1][1] and ci[1][0] <= ci[0][1]  # 1024 and 2048 overlap
    assert "the 1024 and 4096 intervals do not overlap, the 1024 and 2048 ones and the 2048 and 4096 ones do" in page
    assert all(r["loss_spikes"] == 0 and r["grad_spikes"] == r["runs_spiked"] for r in (*t, *f))

    rate, kept = results("claims_nl/claims_acp_tokens_per_s.json"), results("claims_nl/claims_acp_kept_fraction.json")
    acp, base = rate["FoX (Pro) + ACP"], rate["FoX (Pro)"]
    assert f"{acp['mean']:,.0f} tokens/s against {base['mean']:,.0f} without it ({acp['mean'] / base['mean']:.2f}x; " \
           f"the paired difference {acp['paired_delta']:,.0f} +- {acp['paired_ci95']:,.0f} tokens/s, the 95% interval, is not " \
           f"significant, p {acp['p_holm']:.2f})" in page and acp["p_holm"] > 0.05
    assert f"all but {100 * kept['FoX (Pro) + ACP']['mean']:.2f}% of the causal pairs" in page
    pruning = claims("claims_acp")["pruning leaves what FoX (Pro) learns unchanged"]
    assert pruning["verdict"] == "equivalent"
    lo, hi = pruning["ci95"]
    assert f"equivalent within 1%: {100 * pruning['delta']:+.2f}% [{100 * lo:+.2f}%, {100 * hi:+.2f}%], " \
           f"{pruning['n_seeds']} seeds" in page

    cost = claims_table().gpu_seconds()
    total = sum(s for s, _, _ in cost.values())
    n_claims = sum(len(claims(study)) for study in (*studies, "claims_acp"))
    assert all(done for _, _, done in cost.values())
    assert f"{total:,} GPU-seconds, {total / 60:.1f} H100-minutes for {n_claims} claims in five studies" in page
    gate = claims("claims_gate_kinds")["a bias-only gate beats a fixed one"]
    assert f"({100 * gate['delta']:+.1f}% [{100 * gate['ci95'][0]:+.1f}%, {100 * gate['ci95'][1]:+.1f}%], 3 seeds)" in page
    log = (EXPERIMENTS / "claims_nl" / "gpu-calls.log").read_text()
    ended = re.findall(r"^== (\S+) ended rc (\d+) \S+: (\d+) s", log, re.M)
    stopped = [int(s) for name, rc, s in ended if name == "claims_pro_parts" and rc == "124"]
    failed = sum(int(s) for _, rc, s in ended if rc == "1")
    assert f"{stopped[0]} s went to a first run of `claims_pro_parts` stopped" in page and len(stopped) == 1
    assert f"and {failed} s to a call that failed on a missing wheel" in page
