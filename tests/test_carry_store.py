"""scripts/carry_store.py on a real study store (the quickstart's): the slim copy resumes and reads
as the full one does, and merging puts every series back as it was, new runs untouched."""
import json
import lzma
import shutil
import sqlite3
import subprocess
import sys

from tests.conftest import ROOT
from tests.cli import wb
from foxwb.workbench.run.tracking import open_store

SCRIPT = str(ROOT / "scripts" / "carry_store.py")


def _points(db_path, where="1"):
    db = sqlite3.connect(db_path)
    rows = db.execute(f'SELECT run_uuid, "key", step, timestamp, value FROM metrics WHERE {where} '
                      'ORDER BY run_uuid, "key", step, timestamp').fetchall()
    db.close()
    return rows


def _indexes(db_path):
    db = sqlite3.connect(db_path)
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'metrics'")}
    db.close()
    return names & {"index_metrics_run_uuid", "index_metrics_run_uuid_key_step"}


def _results(workdir):
    run = wb("results", "quickstart", "--workdir", workdir, "--format", "json")
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


def test_a_slim_store_resumes_and_reads_as_the_full_one_and_merge_puts_the_series_back(quickstart, tmp_path):
    workdir, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    full = tmp_path / "full"
    shutil.copytree(workdir, full)
    original = _points(full / "mlflow.db")
    series = {(r[0], r[1]) for r in original}
    assert len(original) > 2 * len(series)  # the trials logged per-step series: something to drop

    slim_xz = tmp_path / "carried.db.xz"
    run = subprocess.run([sys.executable, SCRIPT, "slim", str(full / "mlflow.db"), str(slim_xz)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "metric points kept" in run.stdout
    there = tmp_path / "gpu-machine"
    there.mkdir()
    with lzma.open(slim_xz) as src, open(there / "mlflow.db", "wb") as dst:
        shutil.copyfileobj(src, dst)
    carried = _points(there / "mlflow.db")
    assert len(carried) == len(series) and {(r[0], r[1]) for r in carried} == series  # one point per series
    assert set(carried) <= set(original) and not _indexes(there / "mlflow.db")
    # The latest point of each series is the one kept (what latest_metrics holds).
    last = {}
    for r in original:
        last[(r[0], r[1])] = r
    assert set(carried) == set(last.values())
    # What resuming reads (the finished trials by spec hash) and what wb results prints are the same.
    assert open_store(there, "quickstart").finished_trials("quickstart") == \
        open_store(full, "quickstart").finished_trials("quickstart")
    shutil.copytree(full / "trials", there / "trials")
    assert _results(there) == _results(full)

    # The GPU machine adds a run with a series of its own; the store comes back and is merged.
    store = open_store(there, "quickstart")
    new = store.client.create_run(store.experiment_id).info.run_id
    store.log_metrics(new, [("train_loss", 5.0 - 0.1 * step, step) for step in range(50)])
    store.client.set_terminated(new)
    new_points = _points(there / "mlflow.db", f"run_uuid = '{new}'")
    for _ in range(2):  # a second merge changes nothing
        run = subprocess.run([sys.executable, SCRIPT, "merge", str(there / "mlflow.db"), str(full / "mlflow.db")],
                             capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        assert _points(there / "mlflow.db", f"run_uuid != '{new}'") == original
        assert _points(there / "mlflow.db", f"run_uuid = '{new}'") == new_points
        assert _indexes(there / "mlflow.db") == {"index_metrics_run_uuid", "index_metrics_run_uuid_key_step"}
    assert "0 series put back" in run.stdout
    # A slim store used as it is: `merge S.db` alone gives it back its indexes.
    with lzma.open(slim_xz) as src, open(tmp_path / "used.db", "wb") as dst:
        shutil.copyfileobj(src, dst)
    run = subprocess.run([sys.executable, SCRIPT, "merge", str(tmp_path / "used.db")], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert run.returncode == 0 and _indexes(tmp_path / "used.db") == {"index_metrics_run_uuid", "index_metrics_run_uuid_key_step"}


def test_what_is_not_a_store_is_refused_by_name_and_nothing_is_changed(tmp_path):
    """Each mistake gets one line naming the path (exit 2), and no store is touched: the out path
    being the store itself would otherwise replace it with its slim copy."""
    from foxwb.workbench.run.tracking import create_local_store

    create_local_store(tmp_path)
    store = tmp_path / "mlflow.db"
    before = store.read_bytes()
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "empty.db").write_bytes(b"")
    (tmp_path / "folder").mkdir()
    with lzma.open(tmp_path / "store.db.xz", "wb") as f:
        f.write(before)
    cases = [
        (["slim", store, store], "that is the store itself"),
        (["slim", store, tmp_path / "missing" / "out.xz"], f"no folder {tmp_path / 'missing'}"),
        (["slim", store, tmp_path / "folder"], "a folder; name the file"),
        (["slim", tmp_path / "notes.txt", tmp_path / "out.xz"], "not a SQLite file"),
        (["slim", tmp_path / "empty.db", tmp_path / "out.xz"], "not a SQLite file"),
        (["slim", tmp_path / "store.db.xz", tmp_path / "out.xz"], "xz-compressed; decompress it first"),
        (["slim", store, tmp_path / "plain.db"], "the slim copy is xz-compressed; name it so (e.g. plain.db.xz)"),
        (["merge", store, tmp_path / "nope.db"], f"source {tmp_path / 'nope.db'}: no such file"),
        (["merge", store, tmp_path / "." / "mlflow.db"], "that is the store itself"),
        (["merge", store, tmp_path / "folder"], "a folder, not a store"),
        (["merge", store, tmp_path / "store.db.xz"], "xz-compressed"),
        (["merge", tmp_path / "notes.txt", store], f"store {tmp_path / 'notes.txt'}: not a SQLite file"),
    ]
    for args, message in cases:
        run = subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr, (args, run.stderr)
    assert store.read_bytes() == before  # merge checks every path before it touches the store
    assert not (tmp_path / "out.xz").exists() and not (tmp_path / "plain.db").exists() and sorted(p.name for p in (tmp_path / "folder").iterdir()) == []
