"""`wb eval STUDY`: every finished trial of a study's store evaluated once, each one's metrics and
per-item file logged to its tracked run, the variants compared item by item in `wb results`.
On a copy of the quickstart's store (the session's `quickstart` fixture, which the other tests read
as it is)."""
import json
import shutil
import sqlite3
from pathlib import Path

from mlflow.tracking import MlflowClient

from foxwb.workbench.run.tracking import local_tracking_uri
from tests.cli import ROOT, wb

STUDY = ROOT / "studies/quickstart.yaml"


def copy_of_store(workdir: Path, dest: Path) -> Path:
    """The store at ``workdir`` copied to ``dest``, its artifact locations pointed at the copy (MLflow
    keeps them as absolute URIs), so that writing to the copy leaves the original as it was."""
    shutil.copytree(workdir, dest)
    old, new = workdir.resolve().as_uri(), dest.resolve().as_uri()
    with sqlite3.connect(dest / "mlflow.db") as con:
        con.execute("UPDATE experiments SET artifact_location = replace(artifact_location, ?, ?)", (old, new))
        con.execute("UPDATE runs SET artifact_uri = replace(artifact_uri, ?, ?)", (old, new))
    con.close()
    return dest


def test_a_study_is_evaluated_once_logged_per_run_and_compared_per_item(quickstart, tmp_path):
    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    copy = copy_of_store(workdir, tmp_path / "w")
    env = {"WB_EVAL_CACHE": str(tmp_path / "cache")}
    # One trial evaluated in its folder alone first (`wb eval TRIAL`): not evaluated again, but
    # logged to its run, where the study's comparisons read it.
    alone = sorted(p for p in (copy / "trials").iterdir() if (p / "result.json").is_file())[0]
    single = wb("eval", alone, "--task", "wb_next_line", "--limit", 6, set_env=env)
    assert single.returncode == 0, single.stderr[-3000:]
    first = wb("eval", STUDY, "--workdir", copy, "--task", "wb_next_line", "--limit", 6, set_env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "evaluated 5 of 6 finished trial(s)" in first.stderr, first.stderr[-2000:]
    assert f"({alone.name}): its evaluation on wb_next_line logged to its run" in first.stderr, first.stderr[-2000:]
    again = wb("eval", STUDY, "--workdir", copy, "--task", "wb_next_line", "--limit", 6, set_env=env)
    assert again.returncode == 0 and "evaluated 0 of 6" in again.stderr, again.stderr[-2000:]
    client = MlflowClient(local_tracking_uri(copy))
    trials = client.search_runs([e.experiment_id for e in client.search_experiments()], "tags.wb_kind = 'trial'")
    assert len(trials) == 6
    for run in trials:
        assert 0 <= run.data.metrics["eval.wb_next_line.acc"] <= 1
        logged = [a.path for a in client.list_artifacts(run.info.run_id, "eval")]
        assert logged == ["eval/wb_next_line.jsonl"]
    # The original store was not written to.
    assert not list((workdir / "trials").glob("*/eval"))
    results = wb("results", STUDY, "--workdir", copy, "--format", "json")
    assert results.returncode == 0, results.stderr[-2000:]
    compared = json.loads(results.stdout)["downstream"]["wb_next_line"]
    base = json.loads(results.stdout)["base"]
    assert sorted(c["a"] for c in compared) == ["FoX (Pro) - KV-shift", "FoX (Pro) - forget gate"], compared
    # Paired seed by seed over the 2 seeds: 6 items each, 12 pairs; McNemar's p of the discordant ones.
    assert all(c["b"] == base == "FoX (Pro)" and c["items"] == 12 and c["seeds"] == [0, 1] and 0 <= c["p"] <= 1
               for c in compared), compared
    assert all(c["delta_ci"][0] <= c["delta"] <= c["delta_ci"][1] for c in compared), compared
    text = wb("results", STUDY, "--workdir", copy)
    assert text.returncode == 0 and "downstream tasks (wb eval)" in text.stdout, text.stdout[-2000:]
    assert all(f"{c['a']} minus FoX (Pro): acc " in text.stdout for c in compared), text.stdout[-2000:]
    # The dashboard's study page shows the same comparison, read from the runs' logged item files.
    site = wb("dashboard", "--workdir", copy, "--study", STUDY, "--out", tmp_path / "site")
    assert site.returncode == 0, site.stderr[-2000:]
    page = next((tmp_path / "site").glob("study-quickstart-*.html")).read_text()
    assert 'id="downstream"' in page
    for c in compared:
        assert f"<td>{c['a']}</td><td>FoX (Pro)</td><td class=\"num\">{c['acc_a']:.3f}</td>" in page

