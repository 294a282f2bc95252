"""scripts/reproduction.py on a real study store (the quickstart's): the JSON it writes carries the
store's numbers, and the per-position PNG renders through a local Chromium."""
import json
import shutil

import polars as pl
import pytest

from tests.cli import script
from foxwb.workbench.analysis import runs as results


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("google-chrome") or shutil.which("chromium-browser")),
                    reason="needs Chrome or Chromium for kaleido")
def test_reproduction_json_and_png_from_a_real_store(quickstart, tmp_path):
    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    out_json, out_png = tmp_path / "table.json", tmp_path / "fig.png"
    browser = shutil.which("chromium") or shutil.which("google-chrome") or shutil.which("chromium-browser")
    run = script("reproduction.py", "--workdir", workdir, "--study", "quickstart", "--out-json", out_json,
                 "--out-png", out_png, env={"BROWSER_PATH": browser})
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
        return script("position_spans.py", "--workdir", workdir, "--study", "quickstart", "--results", workdir, *extra)

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


def test_position_spans_lists_a_rows_seeds_best_val_ppl_first_with_their_span_means(quickstart):
    """--seeds ROW: that row's seeds ordered by their result file's val_ppl, each with the span
    means of its own per_position_loss; an unknown row is refused naming the rows."""
    import numpy as np

    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]

    def spans(*extra):
        return script("position_spans.py", "--workdir", workdir, "--study", "quickstart", "--results", workdir,
                      "--spans", "0,32,128", *extra)

    run = spans("--seeds", "FoX (Pro)")
    assert run.returncode == 0, run.stderr[-2000:]
    table = run.stdout.split("'FoX (Pro)' by seed, best val_ppl first")[1]
    lines = [[c.strip() for c in l.split("|")[1:-1]] for l in table.splitlines() if l.startswith("| ") and not l.startswith("| seed")]
    frame = results.trial_runs(workdir, "quickstart").filter((pl.col("status") == "FINISHED") & (pl.col("variant") == "FoX (Pro)"))
    expected = []
    for seed, h in frame.select("seed", "spec_hash").unique().iter_rows():
        r = json.loads((workdir / "trials" / h / "result.json").read_text())
        curve = np.array(r["per_position_loss"])
        expected.append((r["val_ppl"], seed, curve[:32].mean(), curve[32:128].mean()))
    expected.sort()
    assert [int(l[0]) for l in lines] == [e[1] for e in expected]
    for line, (ppl, _, a, b) in zip(lines, expected):
        assert float(line[1]) == pytest.approx(ppl, abs=5e-4)
        assert float(line[2]) == pytest.approx(a, abs=5e-4) and float(line[3]) == pytest.approx(b, abs=5e-4)
    bad = spans("--seeds", "nope")
    assert bad.returncode != 0 and "--seeds 'nope' is not a row" in bad.stderr and "FoX (Pro)" in bad.stderr


def test_position_spans_pairs_each_row_with_a_base_seed_by_seed(quickstart, tmp_path):
    """--base: each other row's per-span difference from the base is the mean over seeds of the
    differences of each seed's span means, with its t CI; --json writes the same numbers; an
    unknown base is refused."""
    import numpy as np
    from scipy import stats as sstats

    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path / "spans.json"
    run = script("position_spans.py", "--workdir", workdir, "--study", "quickstart", "--results", workdir,
                 "--spans", "0,32,128", "--base", "FoX (Pro)", "--json", out)
    assert run.returncode == 0, run.stderr[-2000:]
    paired = run.stdout.split("paired with 'FoX (Pro)'")[1]
    line = next(l for l in paired.splitlines() if l.startswith("| FoX (Pro) - KV-shift |"))
    frame = results.trial_runs(workdir, "quickstart").filter(pl.col("status") == "FINISHED")

    def span(variant, seed, a, b):
        h = frame.filter((pl.col("variant") == variant) & (pl.col("seed") == seed))["spec_hash"][0]
        return float(np.mean(json.loads((workdir / "trials" / h / "result.json").read_text())["per_position_loss"][a:b]))

    d = np.array([span("FoX (Pro) - KV-shift", s, 32, 128) - span("FoX (Pro)", s, 32, 128) for s in (0, 1)])
    cell = line.split(" | ")[2]
    assert float(cell.split()[0]) == pytest.approx(d.mean(), abs=5e-4)
    half = sstats.t.ppf(0.975, 1) * d.std(ddof=1) / np.sqrt(2)
    assert float(cell.split()[1].lstrip("±")) == pytest.approx(half, abs=5e-4)
    assert "(n 2," in cell
    written = json.loads(out.read_text())
    assert written["spans"] == [[0, 32], [32, 128]] and written["base"] == "FoX (Pro)"
    kv = next(r for r in written["paired"] if r["row"] == "FoX (Pro) - KV-shift")["spans"][1]
    assert kv["delta"] == pytest.approx(d.mean(), abs=1e-9) and kv["n"] == 2
    assert kv["half_width"] == pytest.approx(half, abs=1e-9)
    base_row = next(r for r in written["rows"] if r["row"] == "FoX (Pro)")
    assert base_row["per_seed"]["1"][1] == pytest.approx(span("FoX (Pro)", 1, 32, 128), abs=1e-9)
    bad = script("position_spans.py", "--workdir", workdir, "--study", "quickstart", "--results", workdir, "--base", "nope")
    assert bad.returncode != 0 and "--base 'nope'" in bad.stderr and "FoX (Pro)" in bad.stderr


def test_metric_history_gives_each_rows_curve_and_its_paired_difference_per_step(quickstart, tmp_path):
    """scripts/metric_history.py on the quickstart's store: at each logged step a row's mean is the
    mean over its seeds of the store's history, the paired difference from --base that of the
    per-seed differences; an unknown metric is refused with the metrics the runs log (exit 2)."""
    import numpy as np

    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]

    def history(*extra):
        return script("metric_history.py", "--workdir", workdir, "--study", "quickstart", *extra)

    out = tmp_path / "h.json"
    run = history("--metric", "val_loss", "--base", "FoX (Pro)", "--json", str(out))
    assert run.returncode == 0, run.stderr[-2000:]
    written = json.loads(out.read_text())
    store = results.open_store(workdir, "quickstart")
    frame = results.trial_runs(workdir, "quickstart", runs=results.finished_runs(store, "quickstart"))
    client = store.client

    def curve(variant, seed):
        run_id = frame.filter((pl.col("variant") == variant) & (pl.col("seed") == seed))["run_id"][0]
        return {m.step: m.value for m in client.get_metric_history(run_id, "val_loss")}

    steps = sorted(curve("FoX (Pro)", 0))
    assert [s["tokens"] for s in written["steps"]] == steps and len(steps) >= 3
    for entry in written["steps"]:
        t = entry["tokens"]
        base = [curve("FoX (Pro)", s)[t] for s in (0, 1)]
        other = [curve("FoX (Pro) - forget gate", s)[t] for s in (0, 1)]
        assert entry["rows"]["FoX (Pro)"]["mean"] == pytest.approx(np.mean(base))
        assert entry["rows"]["FoX (Pro)"]["n"] == 2
        assert entry["paired"]["FoX (Pro) - forget gate"]["delta"] == pytest.approx(np.mean(np.subtract(other, base)))
        assert "FoX (Pro)" not in entry["paired"]
    assert f"| {steps[0]:,} |" in run.stdout
    kept = history("--metric", "acp_kept_fraction")
    assert kept.returncode == 0 and "FoX (Pro) - forget gate" not in kept.stdout.splitlines()[1], kept.stderr[-2000:]
    bad = history("--metric", "nope")
    assert bad.returncode == 2 and "--metric 'nope'" in bad.stderr and "val_loss" in bad.stderr
    assert history("--metric", "val_loss", "--base", "nope").returncode == 2


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("google-chrome") or shutil.which("chromium-browser")),
                    reason="needs Chrome or Chromium for kaleido")
def test_study_figure_draws_any_studys_history_and_lists_the_metrics_on_a_wrong_one(quickstart, tmp_path):
    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    browser = shutil.which("chromium") or shutil.which("google-chrome") or shutil.which("chromium-browser")

    def figure(*extra):
        return script("study_figure.py", "--workdir", workdir, "--study", "quickstart", "--figure", "history",
                      "--out", tmp_path / "h.png", *extra, env={"BROWSER_PATH": browser})

    run = figure("--metric", "acp_kept_fraction")
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "h.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = figure("--metric", "nope")
    assert bad.returncode == 2 and "--metric 'nope'" in bad.stderr and "acp_kept_fraction" in bad.stderr
    ablation = script("study_figure.py", "--workdir", workdir, "--study", "quickstart", "--figure", "effect",
                      "--out", tmp_path / "e.png")
    assert ablation.returncode == 2 and "--figure history and seeds take any" in ablation.stderr
    seeds = script("study_figure.py", "--workdir", workdir, "--study", "quickstart", "--figure", "seeds",
                   "--metric", "val_ppl", "--out", tmp_path / "s.png", env={"BROWSER_PATH": browser})
    assert seeds.returncode == 0, seeds.stderr[-2000:]
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    nope = script("study_figure.py", "--workdir", workdir, "--study", "nope", "--figure", "history",
                  "--out", tmp_path / "n.png")
    assert nope.returncode == 2 and "no study 'nope'" in nope.stderr
