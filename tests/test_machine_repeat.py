"""scripts/machine_repeat.py on the committed study results and the repeat's `wb run` output: the
JSON it writes is the one committed (experiments/llama_h100_repeat/llama_h100_repeat.json), and the paired test
it reports is the project's own."""
import json
from pathlib import Path

from foxwb.workbench.analysis import stats
from tests.cli import script

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--log", "experiments/llama_h100_repeat/llama_h100_repeat.log", "--results", "experiments/table3_4096_llama/table3_4096_llama.json",
        "--row", "Transformer (LLaMA)", "--from-seed", "197",
        "--machine", "1 x NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130, triton 3.6.0, Python 3.12.3)",
        "--date", "2026-12-05", "--code", "1183006", "--gpu-seconds", "195"]


def test_the_committed_repeat_is_what_the_script_makes_of_its_inputs():
    proc = script("machine_repeat.py", *ARGS, timeout=120)
    assert proc.returncode == 0, proc.stderr
    made = json.loads(proc.stdout)
    assert made == json.loads((ROOT / "experiments/llama_h100_repeat/llama_h100_repeat.json").read_text())
    assert [r["seed"] for r in made["rows"]] == list(range(8))
    p = stats.paired({r["seed"]: r["val_ppl_repeat"] for r in made["rows"]}, {r["seed"]: r["val_ppl_first"] for r in made["rows"]})
    assert made["paired_repeat_minus_first"]["mean"] == p.delta and made["paired_repeat_minus_first"]["p_paired_t"] == p.p
    by = made["study_seeds_by_machine"]
    assert by["earlier"]["n"] + by["later"]["n"] == 251 and by["later"]["n"] == 54


def test_a_repeat_seed_the_study_lacks_is_refused(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("10:00:00  start    Transformer (LLaMA) / seed 999  [abcd]\n"
                   "10:01:00  finished Transformer (LLaMA) / seed 999  val_ppl 3.000  (60 s)  [1/1]\n")
    args = [a if a != "experiments/llama_h100_repeat/llama_h100_repeat.log" else str(log) for a in ARGS]
    proc = script("machine_repeat.py", *args, timeout=120)
    assert proc.returncode == 1 and "seeds [999] of the repeat are not in" in proc.stderr
