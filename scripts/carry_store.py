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

A slim store decompressed (``xz -d``) is a working store: ``wb run`` resumes from it and ``wb
results`` reads it. Without its metrics indexes MLflow's history queries are slower;
``merge S.db`` with no sources puts them back (benchmarks/gpu.sh does so before it resumes).
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


class StoreError(Exception):
    """A path that is not a tracking store, or one that cannot be written now; the message names it."""


def check_store(path: Path, role: str) -> None:
    """Refuse, naming ``path``, what is not a readable MLflow SQLite store."""
    if not path.exists():
        raise StoreError(f"{role} {path}: no such file")
    if not path.is_file():
        raise StoreError(f"{role} {path}: a folder, not a store (give its mlflow.db)")
    with open(path, "rb") as f:
        head = f.read(16)
    if head.startswith(b"\xfd7zXZ"):
        raise StoreError(f"{role} {path}: xz-compressed; decompress it first (xz -dk {path})")
    if head != b"SQLite format 3\x00":
        raise StoreError(f"{role} {path}: not a SQLite file (an MLflow store is WORKDIR/mlflow.db)")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.OperationalError as e:
        raise _locked(e, path, role) from None
    finally:
        db.close()
    if not {"metrics", "latest_metrics", "runs"} <= tables:
        raise StoreError(f"{role} {path}: a SQLite file without MLflow's runs and metrics tables")


def slim(source: Path, out: Path) -> tuple[int, int]:
    """Write the slim, xz-compressed copy of ``source`` to ``out``; (metric points before, after)."""
    check_store(source, "store")
    if out.exists() and out.resolve() == source.resolve():
        raise StoreError(f"out {out}: that is the store itself; write the slim copy elsewhere")
    if out.is_dir():
        raise StoreError(f"out {out}: a folder; name the file (e.g. {out / 'store.db.xz'})")
    if not out.parent.is_dir():
        raise StoreError(f"out {out}: no folder {out.parent}")
    if out.suffix != ".xz":
        raise StoreError(f"out {out}: the slim copy is xz-compressed; name it so (e.g. {out.name}.xz)")
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
        try:
            with open(copy, "rb") as src, lzma.open(partial, "wb", preset=9 | lzma.PRESET_EXTREME) as dst:
                shutil.copyfileobj(src, dst)
            partial.replace(out)  # whole or not at all
        finally:
            partial.unlink(missing_ok=True)
    return before, after


def merge(dest: Path, sources: list[Path]) -> int:
    """Copy into ``dest`` every (run, metric) series a source holds more points of, and give it back
    the metrics indexes; the series copied. Every path is checked before ``dest`` is touched, and
    the copy is one transaction: all the sources' series or none."""
    check_store(dest, "store")
    for source in sources:
        check_store(source, "source")
        if source.resolve() == dest.resolve():
            raise StoreError(f"source {source}: that is the store itself; name the stores that hold the full series")
    db = sqlite3.connect(dest, timeout=30)
    try:
        columns = ", ".join(f'"{row[1]}"' for row in db.execute("PRAGMA table_info(metrics)"))
        for i, source in enumerate(sources):
            db.execute(f"ATTACH DATABASE ? AS src{i}", (str(source),))
        copied = 0
        with db:
            for name, on in INDEXES.items():
                db.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {on}")
            for i in range(len(sources)):
                longer = db.execute(f"""SELECT s.run_uuid, s."key" FROM
                        (SELECT run_uuid, "key", count(*) AS n FROM src{i}.metrics GROUP BY run_uuid, "key") AS s
                        JOIN runs ON runs.run_uuid = s.run_uuid
                        LEFT JOIN (SELECT run_uuid, "key", count(*) AS n FROM main.metrics GROUP BY run_uuid, "key") AS d
                        ON d.run_uuid = s.run_uuid AND d."key" = s."key"
                        WHERE s.n > coalesce(d.n, 0)""").fetchall()
                for run, key in longer:
                    db.execute('DELETE FROM main.metrics WHERE run_uuid = ? AND "key" = ?', (run, key))
                    db.execute(f'INSERT INTO main.metrics ({columns}) SELECT {columns} FROM src{i}.metrics '
                               'WHERE run_uuid = ? AND "key" = ?', (run, key))
                copied += len(longer)
    except sqlite3.OperationalError as e:
        raise _locked(e, dest, "store") from None
    finally:
        db.close()
    return copied


def _locked(e: sqlite3.OperationalError, path: Path, role: str) -> Exception:
    if "locked" in str(e):
        return StoreError(f"{role} {path}: locked by another process for 30 s (a wb run writing it?); "
                          "try again once it has stopped")
    return e


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
    m = sub.add_parser("merge", help="put the series (and the metrics indexes) back into a store that came back")
    m.add_argument("store", type=Path, help="the mlflow.db that came back (changed in place)")
    m.add_argument("sources", type=Path, nargs="*", help="stores that hold the full series (none: the indexes only)")
    args = ap.parse_args(argv)
    try:
        if args.command == "slim":
            before, after = slim(args.store, args.out)
            print(f"{args.out}: {after:,} of {before:,} metric points kept, {args.out.stat().st_size / 1e6:.2f} MB")
        else:
            print(f"{args.store}: {merge(args.store, args.sources):,} series put back, the metrics indexes in place")
    except StoreError as e:
        print(f"carry_store: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
