"""The study table and what a researcher reads while and after a study runs, on real Ray Tune and
MLflow: a grid over the forget gate's kind with a grid search over the learning rate, 2 seeds,
run once under a pseudo-terminal (the live view) while `wb status` and `wb run --dry-run` watch
it; then the table's deltas, paired tests and MDEs checked against values computed by hand from
the store, its export through polars, and the power a pilot implies."""
import io
import json
import math
import os
import pty
import re
import subprocess
import sys
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path

import polars as pl
import pytest
import yaml
from mlflow.tracking import MlflowClient
from scipy import stats as sps

from tests.workbench.run.test_run import MINI_BASE
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[3]
ROWS = [f"forget_gate={g} [lr={lr}]" for g in ("data_dependent", "bias_only") for lr in ("0.003", "0.01")]
BASE = "forget_gate=data_dependent"




def wb_here(*args) -> tuple[int, str]:
    """The CLI's main() in this process: what `wb ...` prints, without a process start per call
    (quick enough to poll a running study with)."""
    from foxwb.workbench.cli.main import main

    out = io.StringIO()
    with redirect_stdout(out):
        rc = main([str(a) for a in args])
    return rc, out.getvalue()


def wb_err(*args) -> tuple[int, str, str]:
    from contextlib import redirect_stderr

    err = io.StringIO()
    with redirect_stderr(err):
        rc, out = wb_here(*args)
    return rc, out, err.getvalue()


@pytest.fixture(scope="module")
def grid_search(tmp_path_factory):
    """The study run once through `wb run` on a pseudo-terminal; returns (study file, workdir,
    the terminal's text, what `wb status` and `--dry-run` said of a running trial)."""
    tmp = tmp_path_factory.mktemp("grid_search")
    # 48,000 tokens asked: 94 whole steps of 8 x 64, 48,128 trained, the total progress lines show.
    base = {**MINI_BASE, "train": {**MINI_BASE["train"], "tokens": 48000, "eval_every_tokens": 16384}}
    study = {"name": "grid_search", "base": base, "seeds": [0, 1],
             "design": {"kind": "grid", "axes": {"model.attention.forget_gate": ["data_dependent", "bias_only"]}},
             "search": {"space": {"train.lr": {"choice": [0.003, 0.01]}}, "algorithm": "grid"}}
    path = tmp / "grid_search.yaml"
    path.write_text(yaml.safe_dump(study))
    workdir = tmp / "w"
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "foxwb.workbench.cli.main", "run", str(path), "--workdir", str(workdir),
                             "--progress-seconds", "1", "--max-concurrent", "2"], cwd=ROOT, stdin=follower,
                            stdout=follower, stderr=follower, start_new_session=True)
    os.close(follower)
    chunks = []
    reader = threading.Thread(target=_drain, args=(leader, chunks), daemon=True)
    reader.start()
    seen = {}
    try:
        while proc.poll() is None and len(seen) < 2:
            if (workdir / "mlflow.db").exists():
                _watch(path, workdir, seen)
            time.sleep(0.3)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    reader.join(timeout=10)
    return path, workdir, b"".join(chunks).decode(errors="replace"), proc.returncode, seen


def _drain(fd, chunks):
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            return
        if not data:
            return
        chunks.append(data)


def _watch(path, workdir, seen):
    """What `wb status` and `wb run --dry-run` say of a trial running with tokens done."""
    try:
        if "status" not in seen:
            rc, out = wb_here("status", path, "--workdir", workdir)
            if rc == 0 and re.search(r"^\s+running .* tokens \(\d+%\)  loss \d", out, re.M):
                seen["status"] = out
        if "dry" not in seen:
            rc, out = wb_here("run", path, "--workdir", workdir, "--dry-run")
            if rc == 0 and re.search(r"  running: [\d,]+/[\d,]+ tokens", out):
                seen["dry"] = out
    except Exception:  # the store is being created, or a write holds it for a moment
        pass


def store_values(workdir, metric="test_ppl") -> dict[tuple[str, int], float]:
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("grid_search")
    runs = client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial' and attributes.status = 'FINISHED'")
    return {(f"{r.data.tags['variant']} [{r.data.tags['search_point']}]", int(r.data.tags["seed"])): r.data.metrics[metric]
            for r in runs}


def test_the_study_runs_with_a_live_view_on_a_terminal(grid_search):
    _, workdir, terminal, rc, _ = grid_search
    assert rc == 0, terminal[-3000:]
    assert len(store_values(workdir)) == 8
    # Progress lines per running trial (tokens, loss, ETA) redrawn in place: cursor up and erase.
    assert re.search(r"running  forget_gate=\w+ \[lr=0\.0\d+\] / seed \d  [\d,]+/48,128 tokens \(\d+%\)  loss \d", terminal)
    assert "\x1b[" in terminal and "F\x1b[J" in terminal and "eta " in terminal
    # Start and finish lines name the search point in full.
    for row in ROWS:
        assert f"start    {row} / seed 0" in terminal and f"finished {row} / seed 0" in terminal


def test_status_and_dry_run_show_a_running_trial(grid_search):
    _, _, _, _, seen = grid_search
    assert "status" in seen and "dry" in seen, seen
    assert re.search(r"study 'grid_search': 8 trials: \d+ running", seen["status"])
    assert re.search(r"running +forget_gate=\w+ \[lr=0\.0\d+\] / seed \d +\w{16}  [\d,]+/48,128 tokens \(\d+%\)  loss [\d.]+  eta ",
                     seen["status"])
    assert re.search(r"^  (to run|finished) ", seen["status"], re.M)
    assert re.search(r"\d+ running", seen["dry"].splitlines()[0])
    # Each row's tokens column: what the trial trains (48,128), as the progress lines count it.
    rows = [line for line in seen["dry"].splitlines() if re.search(r" \w{16} ", line)]
    assert rows and all("  48,128  " in line for line in rows), rows


def test_deltas_per_search_point_equal_the_store_by_hand(grid_search):
    path, workdir, _, _, _ = grid_search
    values = store_values(workdir)
    rc, out = wb_here("results", path, "--workdir", workdir, "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["base"] == BASE and doc["metric"] == "test_ppl" and doc["alpha"] == 0.05
    rows = {r["row"]: r for r in doc["rows"]}
    assert list(rows) == ROWS
    for lr in ("0.003", "0.01"):
        base = [values[(f"{BASE} [lr={lr}]", s)] for s in (0, 1)]
        mine = [values[(f"forget_gate=bias_only [lr={lr}]", s)] for s in (0, 1)]
        r = rows[f"forget_gate=bias_only [lr={lr}]"]
        assert r["comparison"] == "same point" and r["base_row"] == f"{BASE} [lr={lr}]"
        assert r["variant"] == "forget_gate=bias_only" and r["n_seeds"] == 2
        assert r["mean"] == pytest.approx(sum(mine) / 2) and r["delta"] == pytest.approx(sum(mine) / 2 - sum(base) / 2)
        diffs = [m - b for m, b in zip(mine, base)]
        sd = abs(diffs[0] - diffs[1]) / math.sqrt(2)
        assert r["paired_delta"] == pytest.approx(sum(diffs) / 2)
        assert r["paired_ci95"] == pytest.approx(12.706204736174698 * sd / math.sqrt(2))  # t(0.975, 1)
        assert r["p_unadjusted"] == pytest.approx(sps.ttest_rel(mine, base).pvalue)
        assert r["ci95"] == pytest.approx(12.706204736174698 * sps.tstd(mine) / math.sqrt(2))
        # The MDE is the effect the paired test detects with 80% power: scipy's noncentral t says so
        # (both tails; the lower one as P(T > c | -ncp), by symmetry).
        crit = sps.t.ppf(0.975, 1)
        ncp = r["mde"] / sd * math.sqrt(2)
        assert sps.nct.sf(crit, 1, ncp) + sps.nct.sf(crit, 1, -ncp) == pytest.approx(0.8, abs=1e-6)
        assert rows[f"{BASE} [lr={lr}]"]["comparison"] == "base" and rows[f"{BASE} [lr={lr}]"]["delta"] is None
        assert r["kinds"] == "forget_gate=bias_only" and rows[f"{BASE} [lr={lr}]"]["kinds"] == ""
        assert r["finished"] == 2 and r["failed"] == 0 and not r["fewer_seeds"]
        assert r["runs_spiked"] is not None and r["grad_norm_max"] > 0
    # Holm: the two p-values adjusted by hand (m = 2); the JSON carries both, and says which the table shows.
    assert doc["p"] == "p_holm"
    holm = {row: r["p_holm"] for row, r in rows.items() if r["p_holm"] is not None}
    ps = sorted((r["p_unadjusted"], row) for row, r in rows.items() if r["p_unadjusted"] is not None)
    assert holm[ps[0][1]] == pytest.approx(min(1, 2 * ps[0][0]))
    assert holm[ps[1][1]] == pytest.approx(max(min(1, 2 * ps[0][0]), ps[1][0]))


def test_the_text_table_by_name_and_by_file_agree(grid_search):
    path, workdir, _, _, _ = grid_search
    by_file = wb("results", path, "--workdir", workdir)  # once as the command a user types
    rc, by_name = wb_here("results", "grid_search", "--workdir", workdir)
    assert by_file.returncode == 0 and rc == 0, by_file.stderr
    # The study table's first line says where the base came from (the verdicts before it do not).
    strip = lambda text: [line for line in text.splitlines() if not line.startswith("study 'grid_search': ")]
    assert strip(by_file.stdout) == strip(by_name)
    assert f"base '{BASE}'" in by_name and "vs (same point): the base at the same searched values" in by_file.stdout
    values = store_values(workdir)
    line = next(l for l in by_file.stdout.splitlines() if l.startswith("forget_gate=bias_only [lr=0.01] "))
    delta = sum(values[("forget_gate=bias_only [lr=0.01]", s)] - values[(f"{BASE} [lr=0.01]", s)] for s in (0, 1)) / 2
    assert f"{delta:+.3f}" in line and "forget_gate=bias_only" in line.split()[-1]
    # One default p, the dashboard's: Holm-adjusted; the unadjusted one on request, named so.
    doc = json.loads(wb_here("results", path, "--workdir", workdir, "--format", "json")[1])
    p_of = lambda text: next(l for l in text.splitlines() if l.startswith("forget_gate=bias_only [lr=0.01] "))
    held = next(r for r in doc["rows"] if r["row"] == "forget_gate=bias_only [lr=0.01]")
    header = lambda text: next(l for l in text.splitlines() if l.startswith("row "))
    assert " p (Holm) " in header(by_name) and "p (Holm): two-sided paired t-test, Holm-adjusted" in by_name
    assert f"{held['p_holm']:.3g}" in p_of(by_name)
    rc, unadjusted = wb_here("results", "grid_search", "--workdir", workdir, "--p", "unadjusted")
    assert rc == 0 and " p (unadjusted) " in header(unadjusted) and " p (Holm) " not in header(unadjusted)
    assert f"{held['p_unadjusted']:.3g}" in p_of(unadjusted)
    rc, out, err = wb_err("results", path, "--workdir", workdir, "--base", "nonexistent")
    assert rc == 2 and "--base 'nonexistent' is not a variant of study 'grid_search'" in err
    assert "'forget_gate=bias_only'" in err and not out


def test_export_round_trips_through_polars(grid_search, tmp_path):
    path, workdir, _, _, _ = grid_search
    rc, out = wb_here("results", path, "--workdir", workdir, "--format", "json")
    rows = pl.DataFrame(json.loads(out)["rows"])
    for fmt in ("csv", "parquet", "json"):
        target = tmp_path / f"table.{fmt}"
        rc, printed = wb_here("results", path, "--workdir", workdir, "--format", fmt, "--out", target)
        assert rc == 0 and printed == ""
        if fmt == "parquet":
            back = pl.read_parquet(target)
            assert back.to_dicts() == rows.to_dicts()
        elif fmt == "csv":
            back = pl.read_csv(target)
            assert back["row"].to_list() == ROWS
            for column in ("mean", "ci95", "delta", "paired_delta", "p_unadjusted", "mde"):
                for a, b in zip(back[column].to_list(), rows[column].to_list()):
                    assert (a is None and b is None) or a == pytest.approx(b, rel=1e-12)
            # Each row's per-seed values, one string in CSV: the very numbers the statistics come from.
            for a, b, seeds in zip(back["values"].to_list(), rows["values"].to_list(), rows["seeds_run"].to_list()):
                assert (a is None and b == []) or [float(v) for v in str(a).split(" | ")] == pytest.approx(b, rel=1e-12)
                assert len(b) == len(seeds)
        else:
            back = pl.DataFrame(json.loads(target.read_text())["rows"])
            assert back.to_dicts() == rows.to_dicts()
    rc, _, err = wb_err("results", path, "--workdir", workdir, "--format", "parquet")
    assert rc == 2 and "--format parquet needs --out FILE" in err


def test_dry_run_says_how_many_seeds_would_detect_an_effect(grid_search):
    from foxwb.workbench.analysis import stats

    path, workdir, _, _, _ = grid_search
    values = store_values(workdir)
    rc, out = wb_here("run", path, "--workdir", workdir, "--dry-run", "--effect", "0.01")
    assert rc == 0
    line = next(l for l in out.splitlines() if l.startswith("forget_gate=bias_only [lr=0.003] ") and BASE in l)
    base = [values[(f"{BASE} [lr=0.003]", s)] for s in (0, 1)]
    diffs = [values[("forget_gate=bias_only [lr=0.003]", s)] - b for s, b in zip((0, 1), base)]
    sd = abs(diffs[0] - diffs[1]) / math.sqrt(2)
    effect = 0.01 * sum(base) / 2
    needed = stats.seeds_needed_paired(effect, sd)
    assert line.split()[-2] == str(needed) and f"{effect:.4g}" in line
    # The seeds found reach 80% power, one fewer does not (scipy's noncentral t, independently).
    if needed.n:
        def power(n):
            crit = sps.t.ppf(0.975, n - 1)
            return sps.nct.sf(crit, n - 1, effect / sd * math.sqrt(n)) + sps.nct.sf(crit, n - 1, -effect / sd * math.sqrt(n))
        assert power(needed.n) >= 0.8 > power(needed.n - 1)
    # --base measures the effect against another variant: the rows are compared with it instead.
    other = "forget_gate=bias_only"
    rc, out = wb_here("run", path, "--workdir", workdir, "--dry-run", "--effect", "0.01", "--base", other)
    assert rc == 0
    lines = out.splitlines()
    lines = lines[next(i for i, l in enumerate(lines) if l.startswith("seeds to detect")):]
    line = next(l for l in lines if l.startswith(f"{BASE} [lr=0.003] "))
    assert f"{other} [lr=0.003]" in line and f"{0.01 * sum(values[(f'{other} [lr=0.003]', s)] for s in (0, 1)) / 2:.4g}" in line
    bad = wb("run", path, "--workdir", workdir, "--dry-run", "--effect", "0.01", "--base", "nope")
    assert bad.returncode == 2 and "--base 'nope' is not a variant" in bad.stderr and "Traceback" not in bad.stderr
    assert bad.stdout == ""  # refused before the trials are listed
    alone = wb("run", path, "--workdir", workdir, "--dry-run", "--base", other)
    assert alone.returncode == 2 and "--base goes with --effect" in alone.stderr and alone.stdout == ""
    # Without --dry-run these flags are refused, not ignored: a forgotten --dry-run runs nothing.
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    tracked = len(client.search_runs([e.experiment_id for e in client.search_experiments()]))
    for flags in (["--effect", "0.01"], ["--base", other], ["--metric", "val_loss"]):
        planned = wb("run", path, "--workdir", workdir, *flags)
        assert planned.returncode == 2 and f"{flags[0]} goes with --dry-run" in planned.stderr, planned.stderr
        assert planned.stdout == "" and "start" not in planned.stderr
    assert len(client.search_runs([e.experiment_id for e in client.search_experiments()])) == tracked


def test_each_final_val_loss_is_logged_once_and_no_stray_experiment(grid_search):
    _, workdir, _, _, _ = grid_search
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    assert [e.name for e in client.search_experiments()] == ["grid_search"]
    default = client.get_experiment("0")  # MLflow's own, kept deleted and pointing into the workdir
    assert default.lifecycle_stage == "deleted" and default.artifact_location == (workdir / "mlartifacts" / "0").resolve().as_uri()
    exp = client.get_experiment_by_name("grid_search")
    for run in client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial'"):
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")]
        assert len(steps) == len(set(steps)) and max(steps) == 48128, steps
        assert client.get_metric_history(run.info.run_id, "val_loss")[-1].value == run.data.metrics["val_loss"]
    assert not (ROOT / "mlruns").exists()


def test_curves_are_per_row(grid_search):
    from foxwb.dashboards.site import training_curves
    from foxwb.workbench.analysis import runs as results, table
    from foxwb.workbench.run.tracking import open_store

    _, workdir, _, _, _ = grid_search
    store = open_store(workdir, "grid_search")
    runs = results.finished_runs(store, "grid_search")
    frame = table.normalise(results.trial_runs(workdir, "grid_search", runs=runs))
    curves = training_curves(store, runs, frame, ROWS)
    assert list(curves) == ROWS and all(ys.shape[0] == 2 for _, ys in curves.values())
