"""scripts/reproduction.py on a real study store (the quickstart's): the JSON it writes carries the
store's numbers, and the per-position PNG renders through a local Chromium."""
import json
import shutil
import subprocess
import sys

import polars as pl
import pytest

from tests.conftest import ROOT
from workbench import results


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("google-chrome") or shutil.which("chromium-browser")),
                    reason="needs Chrome or Chromium for kaleido")
def test_reproduction_json_and_png_from_a_real_store(quickstart, tmp_path):
    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    out_json, out_png = tmp_path / "table.json", tmp_path / "fig.png"
    browser = shutil.which("chromium") or shutil.which("google-chrome") or shutil.which("chromium-browser")
    run = subprocess.run([sys.executable, "scripts/reproduction.py", "--workdir", str(workdir), "--study", "quickstart",
                          "--out-json", str(out_json), "--out-png", str(out_png)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300, env={**__import__("os").environ, "BROWSER_PATH": browser})
    assert run.returncode == 0, run.stderr[-2000:]
    written = json.loads(out_json.read_text())
    store = results.open_store(workdir, "quickstart")
    frame = results.trial_runs(workdir, "quickstart", runs=results.finished_runs(store, "quickstart"))
    for row in written["rows"]:
        seeds = frame.filter(pl.col("variant") == row["variant"])["val_ppl"].to_list()
        assert row["seeds"] == len(seeds)
        assert row["val_ppl_mean"] == pytest.approx(sum(seeds) / len(seeds))
        assert len(row["loss_by_position_32_token_bins"]) > 0
    assert {r["variant"] for r in written["rows"]} == set(frame["variant"])
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out_png.stat().st_size > 20_000


def test_position_spans_averages_each_rows_result_files_over_seeds_and_positions(quickstart):
    """scripts/position_spans.py on the quickstart's workdir (store and trials/ in one folder): each
    row's span values are the mean over positions of the mean over seeds of the trials'
    per_position_loss; a span past the evaluated length is left empty; bad spans are refused."""
    import numpy as np

    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]

    def spans(*extra):
        return subprocess.run([sys.executable, "scripts/position_spans.py", "--workdir", str(workdir), "--study", "quickstart",
                               "--results", str(workdir), *extra], capture_output=True, text=True, cwd=ROOT, timeout=300)

    run = spans("--spans", "0,32,128,100000")
    assert run.returncode == 0, run.stderr[-2000:]
    lines = [l for l in run.stdout.splitlines() if l.startswith("| ") and not l.startswith("| row")]
    frame = results.trial_runs(workdir, "quickstart").filter(pl.col("status") == "FINISHED")
    assert sorted(l.split(" | ")[0][2:] for l in lines) == sorted(set(frame["variant"]))
    for line in lines:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        hashes = frame.filter(pl.col("variant") == cells[0])["spec_hash"].unique().to_list()
        curves = np.array([json.loads((workdir / "trials" / h / "result.json").read_text())["per_position_loss"] for h in hashes])
        assert int(cells[1]) == len(hashes) == 2
        mean = curves.mean(0)
        assert float(cells[2]) == pytest.approx(mean[:32].mean(), abs=5e-4)
        assert float(cells[3]) == pytest.approx(mean[32:128].mean(), abs=5e-4)
        assert cells[4] == ""  # the quickstart evaluates fewer positions than 100000
    bad = spans("--spans", "64,32")
    assert bad.returncode != 0 and "--spans '64,32'" in bad.stderr
