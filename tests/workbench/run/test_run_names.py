"""What a researcher sees of a study in the MLflow UI: each trial's run named as `wb run` names it,
its searched values included (two points of a search never share a name), and each study's
experiment tagged as MLflow 3's classic ML kind, so that the UI opens on its runs rather than on
an empty GenAI overview."""
from mlflow.tracking import MlflowClient

from foxwb.workbench.run.tracking import EXPERIMENT_KIND, Store, create_local_store, local_tracking_uri, open_store, run_name
from foxwb.workbench.spec.errors import validate
from foxwb.workbench.spec.study import StudySpec, expand
from tests.workbench.run.test_confirm import store as confirmed_store

BASE = {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2},
        "data": {"kind": "builtin", "context": 32}, "train": {"tokens": 10000}}


def test_a_searched_studys_runs_are_named_as_wb_run_names_them_one_name_each(random_search_confirmed):
    """A random search of the learning rate with ASHA, then each variant's best on a fresh seed: each
    run's name is the label of `wb run`'s lines for it, and no two runs share one."""
    workdir, proc, _ = random_search_confirmed
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials, _ = confirmed_store(workdir)
    names = [r.data.tags["mlflow.runName"] for r in trials]
    assert len(names) == len(set(names)) == 8, names
    for run in trials:
        tags = run.data.tags
        assert tags["mlflow.runName"] == f"{tags['variant']} [{tags['search_point']}] / seed {tags['seed']}"
        assert tags["search_point"].startswith("lr=")
        # As `wb run` printed it when the trial started.
        assert f"start    {tags['mlflow.runName']}  [{tags['spec_hash']}]" in proc.stderr
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    assert client.get_experiment_by_name("tuned").tags.get(EXPERIMENT_KIND[0]) == EXPERIMENT_KIND[1]


def test_the_run_name_is_the_trials_label_in_wb_runs_lines(tmp_path):
    """A grid search of two learning rates on one variant and seed: "FoX (Pro) / seed 1" twice
    before; now each name carries its point, as run_name (the lines of `wb run` too) does."""
    study = {"name": "grid", "base": BASE, "seeds": [1], "design": {"kind": "variants", "variants": [{"name": "FoX (Pro)"}]},
             "search": {"algorithm": "grid", "space": {"train.lr": {"choice": [0.001, 0.003]}}}}
    trials = expand(validate(StudySpec, study))
    create_local_store(tmp_path)
    store = Store(local_tracking_uri(tmp_path), "grid", tmp_path / "mlartifacts")
    parent = store.study_run("grid", "", "test")
    runs = [store.start_trial(parent, "grid", t, "test") for t in trials]
    names = [store.client.get_run(r).data.tags["mlflow.runName"] for r in runs]
    assert names == [run_name(t) for t in trials] == ["FoX (Pro) [lr=0.001] / seed 1", "FoX (Pro) [lr=0.003] / seed 1"]


def test_an_experiment_is_tagged_when_made_and_an_older_one_when_written(tmp_path):
    create_local_store(tmp_path)
    uri = local_tracking_uri(tmp_path)
    client = MlflowClient(uri)
    kind = lambda name: client.get_experiment_by_name(name).tags.get(EXPERIMENT_KIND[0])
    Store(uri, "new", tmp_path / "mlartifacts")
    assert kind("new") == "custom_model_development"
    # An experiment of a store written before the tag: reading it leaves it as it is; the next
    # driver to write it tags it.
    client.create_experiment("older", artifact_location=(tmp_path / "mlartifacts").resolve().as_uri())
    assert kind("older") is None
    assert open_store(tmp_path, "older").finished_trials("older") == {} and kind("older") is None
    Store(uri, "older", tmp_path / "mlartifacts").parent_run("older")
    assert kind("older") == "custom_model_development"

