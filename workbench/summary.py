"""The lines ``wb run`` ends with, and its exit code: what ran, what failed and why, and for a
study stopped before its end, why and how to resume it."""
from __future__ import annotations

from workbench.driver import EXIT_INTERRUPTED


def report(study, run, command: str) -> int:
    """Print the summary of ``run`` (a runner.StudyRun); ``command`` resumes the study. Returns
    0, 1 where a trial failed or the study stopped, 130 where it was interrupted."""
    ran = list(run.outcomes.values())
    before = sum(t.spec_hash in run.done for t in run.trials if not t.optuna_samples)
    count = {s: sum(o.status == s for o in ran) for s in ("FINISHED", "FAILED", "KILLED", "PENDING")}
    stopped = f"; {count['KILLED']} stopped mid-way; {count['PENDING']} not started" if run.stopped else ""
    print(f"\nstudy {study.name!r}: {len(run.trials)} trials or searches; {before} trials were already done; "
          f"{count['FINISHED']} finished now; {count['FAILED']} failed{stopped}")
    for o in ran:
        detail = f"val_ppl {o.val_ppl:.3f}" if o.val_ppl else o.reason.strip().splitlines()[-1][:200] if o.reason else ""
        point = f" [{o.trial.point_label}]" if o.trial.search_point else ""
        print(f"  {o.status:<9} {o.trial.variant}{point} / seed {o.trial.seed}  {detail}")
    failures = [o for o in ran if o.status == "FAILED"]
    if failures:
        print(f"{len(failures)} trial(s) failed: " + "; ".join(f"{o.trial.variant} / seed {o.trial.seed}" for o in failures))
    if run.stopped:
        print(f"the study stopped before its end: {run.reason}")
        print(f"it is resumable: `{command}` runs what is not finished (stopped trials resume from their checkpoints)")
        return EXIT_INTERRUPTED if run.stopped == "interrupted" else 1
    return 1 if failures else 0
