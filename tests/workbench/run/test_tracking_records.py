"""What MLflow holds for a study to be reproduced and read (docs/running-studies.md, "Tracking"), in
the quickstart's real store (the session's `wb run`, conftest.quickstart): the library versions on
its parent run, each trial's corpus as a dataset input with the digests its result records, and the
study page's figures on the parent run once `wb dashboard` built it."""
import json
import platform
import shutil
import sqlite3
from importlib.metadata import version
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from foxwb.workbench.run.tracking import local_tracking_uri
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[3]
LIBRARIES = {"torch": "torch", "numpy": "numpy", "scipy": "scipy", "ray": "ray", "optuna": "optuna",
             "mlflow": "mlflow", "pydantic": "pydantic", "polars": "polars", "tokenizers": "tokenizers"}


def parent_of(client: MlflowClient, study: str = "quickstart"):
    exp = client.get_experiment_by_name(study)
    return client.search_runs([exp.experiment_id], f"tags.wb_kind = 'study' and tags.study = '{study}'")[0]


def local_path(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


@pytest.fixture
def store_copy(quickstart, tmp_path):
    """A copy of the quickstart store whose runs point at the copy's own artifacts: the shared store
    is only read (other tests and xdist workers read it), and `wb dashboard` writes figures."""
    shared, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    workdir = tmp_path / "w"
    shutil.copytree(shared, workdir, ignore=shutil.ignore_patterns("trials", "site", "dashboard"))
    with sqlite3.connect(workdir / "mlflow.db") as db:
        for table, column in (("runs", "artifact_uri"), ("experiments", "artifact_location")):
            db.execute(f"UPDATE {table} SET {column} = replace({column}, ?, ?)",
                       (str(shared.resolve()), str(workdir.resolve())))
    db.close()
    return workdir


def test_the_parent_run_and_each_result_carry_the_versions_that_decide_a_result(quickstart):
    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    tags = parent_of(MlflowClient(local_tracking_uri(workdir))).data.tags
    installed = {name: version(dist) for name, dist in LIBRARIES.items()}
    assert installed["optuna"] and tags["version.optuna"] == installed["optuna"]
    assert {name: tags.get(f"version.{name}") for name in installed} == installed
    assert tags["version.python"] == platform.python_version()
    assert tags["version.workbench"] == version("fox-workbench") and tags["version.code"] == tags["code_version"]
    # wb results --format json shows them, as the parent run holds them.
    out = wb("results", ROOT / "studies/quickstart.yaml", "--workdir", workdir, "--format", "json")
    assert out.returncode == 0, out.stderr[-2000:]
    shown = json.loads(out.stdout)["versions"]
    assert shown == {k.removeprefix("version."): v for k, v in tags.items() if k.startswith("version.")}
    # A trial's folder alone carries them too.
    results = [json.loads(p.read_text()) for p in (workdir / "trials").glob("*/result.json")]
    assert len(results) == 6
    for result in results:
        assert {name: result["versions"][name] for name in installed} == installed


def test_each_trial_run_names_the_corpus_it_read_with_the_digests_its_result_records(quickstart):
    workdir = quickstart[0]
    client = MlflowClient(local_tracking_uri(workdir))
    parent = parent_of(client)
    runs = client.search_runs([parent.info.experiment_id], "tags.wb_kind = 'trial'")
    assert len(runs) == 6
    for run in runs:
        result = json.loads((local_path(run.info.artifact_uri) / "result.json").read_text())
        inputs = {next(t.value for t in i.tags if t.key == "mlflow.data.context"): i.dataset
                  for i in run.inputs.dataset_inputs}
        assert set(inputs) == {"training", "evaluation"}
        training, test = inputs["training"], inputs["evaluation"]
        assert training.name == test.name == "builtin:stdlib"
        assert training.digest == result["corpus"]["sha256"] and test.digest == result["test_digest"]
        assert json.loads(training.source) == {"sources": "stdlib", "python": result["corpus"]["python"]}
        assert training.source_type == "builtin"
        assert json.loads(test.profile)["documents"] == result["test_documents"]


def test_an_english_sets_whole_sha256_is_kept_in_the_source_and_its_digest_fits_mlflow(tmp_path):
    """MLflow refuses a dataset digest over 36 characters: an English set's sha256 (64) once
    stopped every trial of a study when its result was logged."""
    from foxwb.workbench.run.records import dataset_inputs

    sha = "4693d0d1ba8b2900fa247450b078b1cac9a17d216b254243f8eea3985d711d85"
    result = {"spec": {"data": {"kind": "english", "set": "core", "path": "wb-corpora", "context": 128}},
              "corpus": {"set": "core", "sha256": sha}, "test_digest": "0123456789abcdef", "test_documents": 9}
    training, test = (i.dataset for i in dataset_inputs(result))
    assert training.name == "english:core" and training.digest == sha[:16] and test.digest == "0123456789abcdef"
    assert json.loads(training.source) == {"path": "wb-corpora", "sha256": sha}
    client = MlflowClient(local_tracking_uri(tmp_path))  # and MLflow takes them
    run = client.create_run(client.create_experiment("e"))
    client.log_inputs(run.info.run_id, datasets=dataset_inputs(result))
    assert {i.dataset.digest for i in client.get_run(run.info.run_id).inputs.dataset_inputs} == {sha[:16], "0123456789abcdef"}


def figure_files(client: MlflowClient, run_id: str) -> dict[str, str]:
    folder = local_path(client.get_run(run_id).info.artifact_uri)
    return {a.path: (folder / a.path).read_text() for a in client.list_artifacts(run_id, "figures")}


def test_wb_dashboard_puts_the_page_figures_on_the_parent_run_replacing_the_last_builds(store_copy, tmp_path):
    client = MlflowClient(local_tracking_uri(store_copy))
    parent = parent_of(client).info.run_id
    # An earlier build's: a figure this build redraws, and one it no longer has.
    client.log_text(parent, "an earlier build", "figures/training-curves.html")
    client.log_text(parent, "an earlier build", "figures/gone.html")
    built = wb("dashboard", "--workdir", store_copy, "--out", tmp_path / "site")
    assert built.returncode == 0 and built.stderr == "", built.stderr[-2000:]
    files = figure_files(client, parent)
    page = next((tmp_path / "site").glob("study-quickstart-*.html")).read_text()
    assert len(files) == page.count("var f=")  # each of the page's figures once
    assert {"figures/per-position-loss.html", "figures/training-curves.html", "figures/seeds.html",
            "figures/cost.html"} <= set(files)
    assert "figures/gone.html" not in files
    for text in files.values():
        assert "an earlier build" not in text and "Plotly.newPlot" in text and "FoX (Pro) - KV-shift" in text
    # Built again: the same files, replaced, never a second copy.
    again = wb("dashboard", "--workdir", store_copy, "--study", "quickstart", "--out", tmp_path / "site")
    assert again.returncode == 0 and set(figure_files(client, parent)) == set(files)
    assert sum(1 for _ in local_path(client.get_run(parent).info.artifact_uri).rglob("*.html")) == len(files)


def test_a_parent_run_that_cannot_take_figures_leaves_the_dashboard_built_with_one_line(store_copy, tmp_path):
    client = MlflowClient(local_tracking_uri(store_copy))
    parent = parent_of(client).info.run_id
    # An artifact folder nobody can write, root included (as a server's the user has no rights on):
    # /dev/null is a file.
    with sqlite3.connect(store_copy / "mlflow.db") as db:
        db.execute("UPDATE runs SET artifact_uri = 'file:///dev/null/artifacts' WHERE run_uuid = ?", (parent,))
    db.close()
    built = wb("dashboard", "--workdir", store_copy, "--out", tmp_path / "site")
    assert built.returncode == 0, built.stderr[-2000:]
    assert next((tmp_path / "site").glob("study-quickstart-*.html")).read_text().count("Plotly") > 0
    lines = built.stderr.strip().splitlines()
    assert len(lines) == 1 and "the figures of study 'quickstart' are not in MLflow" in lines[0] and parent in lines[0]


def test_a_moved_store_gets_the_figures_under_its_own_artifacts_not_at_its_old_path(quickstart, tmp_path):
    """A store brought from another machine records that machine's paths: the figures go under the
    workdir's own mlartifacts, where `wb` reads a moved store's artifacts, and the old path is not
    made here."""
    shared = quickstart[0]
    workdir, old = tmp_path / "w", tmp_path / "gpu-machine" / "w"
    shutil.copytree(shared, workdir, ignore=shutil.ignore_patterns("trials", "site", "dashboard"))
    with sqlite3.connect(workdir / "mlflow.db") as db:
        for table, column in (("runs", "artifact_uri"), ("experiments", "artifact_location")):
            db.execute(f"UPDATE {table} SET {column} = replace({column}, ?, ?)", (str(shared.resolve()), str(old)))
    db.close()
    built = wb("dashboard", "--workdir", workdir, "--out", tmp_path / "site")
    assert built.returncode == 0 and built.stderr == "", built.stderr[-2000:]
    parent = parent_of(MlflowClient(local_tracking_uri(workdir))).info.run_id
    assert not old.parent.exists()
    assert (workdir / "mlartifacts" / parent / "artifacts" / "figures" / "training-curves.html").is_file()
