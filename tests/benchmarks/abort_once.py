"""A stand-in for comm_volume.worker whose rank 1 aborts (SIGABRT) the first time it runs in a
folder (every time with ``always``): the crash comm_volume starts its workers again after."""
import json
import os
from pathlib import Path


def worker(rank: int, workers: int, rendezvous: str, spec_json: str, out: str) -> None:
    given = json.loads(spec_json)
    flag = Path(given["flag"])
    if rank == 1 and (given.get("always") or not flag.exists()):
        flag.touch()
        os.abort()
    if rank == 0:
        Path(out).write_text(json.dumps({"rank0": True}))
