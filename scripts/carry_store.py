"""Carry a study's tracking store to another machine small, and put its series back after.

A store of a few hundred 125M trials is mostly per-step series (train_loss, lr, grad_norm, the
system metrics): 30 MB, 3 MB xz-compressed, where resuming the study needs only each run's tags,
params and final metrics. ``slim`` writes a copy that keeps each run's latest value of every
metric (what ``wb results`` and resume-by-spec-hash read) and drops the rest of the series and
the metrics table's two secondary indexes, VACUUMed and xz-compressed (benchmarks/gpu.sh restores
the indexes before it resumes). ``merge`` takes the store that comes back (every earlier run, now
slim, and the new ones whole) and copies each earlier run's full series into it from the stores
that still have them: for every (run, metric) where a source holds more points than the
destination, the destination's points are replaced by the source's.

    python scripts/carry_store.py slim WORKDIR/mlflow.db wb-runs/llama.db.xz
    python scripts/carry_store.py merge returned/mlflow.db WORKDIR/mlflow.db [more.db ...]
"""
from __future__ import annotations

import argparse
import lzma
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

INDEXES = {"index_metrics_run_uuid": "metrics (run_uuid)",
           "index_metrics_run_uuid_key_step": 'metrics (run_uuid, "key", step)'}


def slim(source: Path, out: Path) -> tuple[int, int]:
    """Write the slim, xz-compressed copy of ``source`` to ``out``; (metric points before, after)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "store.db"
        _backup(source, copy)
        db = sqlite3.connect(copy)
        before = db.execute("SELECT count(*) FROM metrics").fetchone()[0]
        # Keep the row latest_metrics was taken from (MLflow's rule: the highest step, then the
        # latest timestamp, then the highest value), one per run and metric.
        db.execute("""DELETE FROM metrics WHERE rowid NOT IN (
                          SELECT rowid FROM (SELECT rowid, row_number() OVER (PARTITION BY run_uuid, "key"
                              ORDER BY step DESC, timestamp DESC, value DESC) AS rank FROM metrics) WHERE rank = 1)""")
        for name in INDEXES:
            db.execute(f"DROP INDEX IF EXISTS {name}")
        db.commit()
        after = db.execute("SELECT count(*) FROM metrics").fetchone()[0]
        db.execute("VACUUM")
        db.close()
        partial = out.with_name(out.name + ".partial")
        with open(copy, "rb") as src, lzma.open(partial, "wb", preset=9 | lzma.PRESET_EXTREME) as dst:
            shutil.copyfileobj(src, dst)
        partial.replace(out)  # whole or not at all
    return before, after


def merge(dest: Path, sources: list[Path]) -> int:
    """Copy into ``dest`` every (run, metric) series a source holds more points of; the series copied."""
    db = sqlite3.connect(dest)
    for name, columns in INDEXES.items():
        db.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {columns}")
    columns = ", ".join(f'"{row[1]}"' for row in db.execute("PRAGMA table_info(metrics)"))
    copied = 0
    with db:  # one transaction: all the sources' series or none
        for i, source in enumerate(sources):
            db.execute(f"ATTACH DATABASE ? AS src{i}", (str(source),))
            longer = db.execute(f"""SELECT s.run_uuid, s."key" FROM
                    (SELECT run_uuid, "key", count(*) AS n FROM src{i}.metrics GROUP BY run_uuid, "key") AS s
                    JOIN runs ON runs.run_uuid = s.run_uuid
                    LEFT JOIN (SELECT run_uuid, "key", count(*) AS n FROM metrics GROUP BY run_uuid, "key") AS d
                    ON d.run_uuid = s.run_uuid AND d."key" = s."key"
                    WHERE s.n > coalesce(d.n, 0)""").fetchall()
            for run, key in longer:
                db.execute('DELETE FROM metrics WHERE run_uuid = ? AND "key" = ?', (run, key))
                db.execute(f'INSERT INTO metrics ({columns}) SELECT {columns} FROM src{i}.metrics WHERE run_uuid = ? AND "key" = ?',
                           (run, key))
            copied += len(longer)
    for i in range(len(sources)):
        db.execute(f"DETACH DATABASE src{i}")
    db.close()
    return copied


def _backup(source: Path, to: Path) -> None:
    """A consistent copy of a SQLite file (a driver may be writing to it)."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dst = sqlite3.connect(to)
    src.backup(dst)
    src.close()
    dst.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("slim", help="a small xz copy to carry: each run's latest metric values, no series")
    s.add_argument("store", type=Path, help="an mlflow.db")
    s.add_argument("out", type=Path, help="where the .db.xz goes")
    m = sub.add_parser("merge", help="put the series back into a store that came back")
    m.add_argument("store", type=Path, help="the mlflow.db that came back (changed in place)")
    m.add_argument("sources", type=Path, nargs="+", help="stores that hold the full series")
    args = ap.parse_args(argv)
    for path in [args.store, *getattr(args, "sources", [])]:
        if not path.is_file():
            print(f"carry_store: no store at {path}", file=sys.stderr)
            return 2
    if args.command == "slim":
        before, after = slim(args.store, args.out)
        print(f"{args.out}: {after:,} of {before:,} metric points kept, {args.out.stat().st_size / 1e6:.2f} MB")
    else:
        print(f"{args.store}: {merge(args.store, args.sources):,} series put back")
    return 0


if __name__ == "__main__":
    sys.exit(main())
