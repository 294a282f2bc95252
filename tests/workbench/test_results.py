"""Reading a tracking store that has moved: a study's workdir copied from the GPU machine to
another path still yields its per-position artifacts (the dashboard's L(i) figure needs them)."""
import shutil

from workbench import results
from workbench.tracking import create_local_store, open_store


def test_per_position_artifacts_are_found_after_the_workdir_moves(tmp_path):
    first = tmp_path / "on-the-gpu-machine"
    first.mkdir()
    create_local_store(first)
    store = open_store(first, "moved_study")
    run = store.client.create_run(store.experiment_id)
    curve = {"per_position_loss": [2.5, 2.0, 1.5], "ppl_at_length": {"2": 9.5}}
    store.client.log_dict(run.info.run_id, curve, "per_position_loss.json")
    store.client.set_terminated(run.info.run_id)

    moved = tmp_path / "here"
    shutil.copytree(first, moved)
    shutil.rmtree(first)  # the recorded absolute artifact paths now point nowhere
    store = open_store(moved, "moved_study")
    runs = store.client.search_runs([store.experiment_id])
    assert results.per_position(store, runs) == {runs[0].info.run_id: curve}
