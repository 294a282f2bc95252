"""Build time of the dashboard site for a study of many tracked runs.

    python benchmarks/dashboard_build.py --runs 1000 [--out FILE]

Fills a fresh MLflow store through the workbench's own Store (the writes a study makes: a child
run per trial with params, a validation-loss history, final metrics, spec/result/per-position-loss
artifacts), then times `build_site` over it. The values are synthetic; the store, the reads and
the site are the real ones. Prints the figures and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

import common
from foxwb.dashboards.site import build_site
from foxwb.workbench.spec.study import Trial
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.run.tracking import Store, local_tracking_uri


def fill(workdir: Path, runs: int, seeds: int, positions: int) -> None:
    store = Store(local_tracking_uri(workdir), "many", workdir / "mlartifacts")
    parent = store.study_run("many", "synthetic values, real store", "measure")
    rng = np.random.default_rng(0)
    for i in range(runs):
        variant, seed = f"variant {i // seeds:03d}", i % seeds
        spec = TrialSpec(seed=seed, train={"lr": 1e-3 * (1 + i // seeds)})
        run_id = store.start_trial(parent, "many", Trial(variant, seed, spec), "measure")
        store.log_metrics(run_id, [("val_loss", 3.0 - 0.1 * k + rng.normal(0, 0.01), 10000 * k) for k in range(1, 11)])
        loss = 2.0 + np.exp(-np.arange(positions) / 50) + rng.normal(0, 0.05, positions)
        store.finish_trial(run_id, {"val_loss": float(loss.mean()), "val_ppl": float(np.exp(loss.mean())),
                                    "n_params": 1e6, "tokens_per_s": 1e4, "train_tokens": 100000,
                                    "spec": spec.model_dump(mode="json"), "per_position_loss": loss.tolist(),
                                    "ppl_at_length": {}})
    store.end_study(parent, 0)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--positions", type=int, default=512)
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<machine>_dashboard.json)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        start = time.perf_counter()
        fill(workdir, args.runs, args.seeds, args.positions)
        filled = time.perf_counter() - start
        start = time.perf_counter()
        build_site(local_tracking_uri(workdir), workdir / "site", workdir / "mlartifacts")
        built = time.perf_counter() - start
        size = sum(p.stat().st_size for p in (workdir / "site").iterdir())
    record = {"runs": args.runs, "variants": args.runs // args.seeds, "seeds": args.seeds, "positions": args.positions,
              "fill_seconds": filled, "build_seconds": built, "site_bytes": size}
    print(json.dumps(record, indent=1))
    common.write(args.out, "dashboard", record, argv)


if __name__ == "__main__":
    main()
