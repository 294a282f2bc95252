"""The paired item comparison (McNemar's exact test) and the shipped task's items."""
import pytest

from foxwb.workbench.downstream import paired
from foxwb.workbench.downstream.local_task import next_line_items
from foxwb.workbench.spec.errors import SpecError


def test_mcnemar_exact_p_by_hand():
    a = [1, 1, 1, 1, 1, 0, 0, 1, 0, 1]
    b = [0, 0, 0, 0, 1, 1, 0, 1, 0, 1]
    found = paired.mcnemar_exact(a, b)
    # Discordant: 4 items only A got right, 1 only B: p = 2 P(Bin(5, 1/2) <= 1) = 2 (1 + 5) / 32.
    assert (found["a_only"], found["b_only"], found["items"]) == (4, 1, 10)
    assert found["p"] == pytest.approx(12 / 32)
    assert paired.mcnemar_exact([1, 0, 1], [1, 0, 1])["p"] == 1.0  # no discordant item: no evidence
    assert paired.mcnemar_exact([1] * 12, [0] * 12)["p"] == pytest.approx(2 / 2**12)


def test_items_pair_seed_by_seed_and_by_item():
    def records(seed_bits, hashes="abcd"):
        return [{"doc_id": i, "doc_hash": h, "correct": c} for i, (h, c) in enumerate(zip(hashes, seed_bits))]

    a = {0: records([1, 1, 0, 1]), 1: records([1, 1, 1, 0]), 2: records([1, 1, 1, 1])}
    b = {0: records([0, 1, 0, 1]), 1: records([0, 0, 1, 0], hashes="abcX")}  # seed 2: A's alone; item 3 of seed 1 differs
    found = paired.compare(a, b)
    assert found["seeds"] == [0, 1] and found["items"] == 4 + 3
    assert (found["a_only"], found["b_only"]) == (1 + 2, 0)
    assert found["p"] == pytest.approx(2 / 8)
    assert found["acc_a"] == pytest.approx(6 / 7) and found["delta"] == pytest.approx(6 / 7 - 3 / 7)
    assert paired.compare(a, {5: records([1, 1, 1, 1])}) is None  # no seed in common
    low, high = found["delta_ci"]
    assert low <= found["delta"] <= high and high <= 1 and low >= -1


def test_the_bootstrap_interval_widens_with_the_seeds_spread():
    """Two pairs of variants with the same pooled items: in one the difference is the same at every
    seed, in the other it comes from one seed alone. McNemar's p is the same; the interval, whose
    samples are the seeds too, is wider where the seeds disagree, and then reaches 0."""
    steady = [paired.np.array([1.0] * 10 + [0.0] * 30) for _ in range(4)]
    one_seed = [paired.np.array([1.0] * 40)] + [paired.np.zeros(40) for _ in range(3)]
    s_low, s_high = paired.bootstrap_delta(steady)
    o_low, o_high = paired.bootstrap_delta(one_seed)
    assert o_high - o_low > 2 * (s_high - s_low)
    assert s_low > 0 and o_low <= 0  # the steady difference excludes 0; the one seed's does not
    assert paired.bootstrap_delta(steady) == [s_low, s_high]  # fixed draws: the same interval each time


TEXTS = ["import os\nimport sys\ndef main(argv):\n    return len(argv)\nprint(main(sys.argv))\n",
         "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n",
         "for value in range(10):\n    total = total + value\nprint('the total', total)\n"]


def test_next_line_items_hold_the_true_line_among_lines_of_other_documents():
    items = next_line_items(TEXTS, seed=3, n_items=50)
    assert items == next_line_items(TEXTS, seed=3, n_items=50)  # the same questions for every trial
    assert items != next_line_items(TEXTS, seed=4, n_items=50)
    assert len({(i["document"], i["line"]) for i in items}) == len(items) > 6
    for item in items:
        lines = TEXTS[item["document"]].split("\n")
        assert item["choices"][item["label"]] == lines[item["line"]] + "\n"
        assert item["context"] == "".join(line + "\n" for line in lines[: item["line"]])
        others = [c for k, c in enumerate(item["choices"]) if k != item["label"]]
        assert len(others) == 3 and len(set(item["choices"])) == 4
        assert all(o[:-1] not in lines for o in others)  # drawn from the other documents


def test_one_document_is_refused_with_the_advice():
    with pytest.raises(SpecError, match="needs 2 or more.*data.val_fraction"):
        next_line_items(TEXTS[:1])


def test_a_studys_variants_are_compared_with_the_base_from_the_items_logged_to_its_runs(tmp_path):
    """What `wb results --format json` shows under "downstream" and the dashboard's table: the
    per-item files `wb eval STUDY` logged to the finished trials' runs (a real MLflow store), each
    variant against the base; a failed trial's are left out."""
    import json

    from foxwb.workbench.downstream.study import store_comparisons
    from foxwb.workbench.run.tracking import Store, local_tracking_uri
    from foxwb.workbench.train import layout

    store = Store(local_tracking_uri(tmp_path), "items", layout.artifacts(tmp_path))
    bits = {("base", 0, "FINISHED"): [1, 0, 0, 1], ("base", 1, "FINISHED"): [0, 0, 1, 1],
            ("gate off", 0, "FINISHED"): [1, 1, 1, 1], ("gate off", 1, "FINISHED"): [1, 1, 1, 1],
            ("gate off", 2, "FAILED"): [0, 0, 0, 0]}
    for (variant, seed, status), correct in bits.items():
        run = store.client.create_run(store.experiment_id, tags={"variant": variant, "seed": str(seed)})
        items = tmp_path / f"{variant}-{seed}" / "wb_next_line.jsonl"
        items.parent.mkdir()
        items.write_text("".join(json.dumps({"doc_id": i, "doc_hash": str(i), "correct": c}) + "\n"
                                 for i, c in enumerate(correct)))
        store.client.log_artifact(run.info.run_id, str(items), "eval")
        store.client.set_terminated(run.info.run_id, status)
    runs = [store.client.get_run(r.info.run_id) for r in store.client.search_runs([store.experiment_id])]
    (found,) = store_comparisons(store, runs, "base")["wb_next_line"]
    assert (found["a"], found["b"], found["seeds"], found["items"]) == ("gate off", "base", [0, 1], 8)
    assert (found["a_only"], found["b_only"]) == (4, 0) and found["p"] == pytest.approx(2 / 16)
    assert store_comparisons(store, runs, "absent") == {}
