"""The lines ``wb run`` ends with, and its exit code: what ran, what failed and why, and for a
study stopped before its end, why and how to resume it."""
from __future__ import annotations

from foxwb.workbench.run.driver import EXIT_INTERRUPTED
from foxwb.workbench.run.stops import EXIT_OUTPUT_CLOSED
from foxwb.workbench.run.live_view import count as counted


def report(study, run, command: str) -> int:
    """Print the summary of ``run`` (a runner.StudyRun); ``command`` resumes the study. Returns
    0, 1 where a trial failed or the study stopped, 130 where it was interrupted, 141 where its
    output was closed."""
    ran = list(run.outcomes.values())
    before = sum(t.spec_hash in run.done for t in run.trials if not t.optuna_samples)
    count = {s: sum(o.status == s for o in ran) for s in ("FINISHED", "FAILED", "KILLED", "PENDING")}
    stopped = f"; {count['KILLED']} stopped mid-way; {count['PENDING']} not started" if run.stopped else ""
    resumed = sum(o.status == "FINISHED" and o.resumed for o in ran)
    from_checkpoints = f" ({resumed} of them from a checkpoint)" if resumed else ""
    searches = sum(1 for t in run.trials if t.optuna_samples)  # an adaptive search: its draws are trials of their own
    what = counted(len(run.trials) - searches, "trial") + (
        f" and {counted(searches, 'adaptive search', 'adaptive searches')}" if searches else "")
    print(f"\nstudy {study.name!r}: {what}; {before} {'trial was' if before == 1 else 'trials were'} already done; "
          f"{count['FINISHED']} finished now{from_checkpoints}; {count['FAILED']} failed{stopped}")
    for o in ran:
        detail = f"test_ppl {o.test_ppl:.3f}" if o.test_ppl else f"val_ppl {o.val_ppl:.3f}" if o.val_ppl else o.reason.strip().splitlines()[-1][:200] if o.reason else \
            "not started" if o.status == "PENDING" else ""
        print(f"  {o.status:<9} {o.trial.row} / seed {o.trial.seed}  {detail}")
    failures = [o for o in ran if o.status == "FAILED"]
    if failures:
        print(f"{counted(len(failures), 'trial')} failed: " + "; ".join(f"{o.trial.variant} / seed {o.trial.seed}" for o in failures))
    if run.stopped:
        print(f"the study stopped before its end: {run.reason}")
        print(f"it is resumable: `{command}` runs what is not finished ({resume_note([o.trial for o in ran if o.status == 'KILLED'], run.resumable)})")
        return {"interrupted": EXIT_INTERRUPTED, "output": EXIT_OUTPUT_CLOSED}.get(run.stopped, 1)
    return 1 if failures else 0


def resume_note(stopped: list, resumable: frozenset[str] | set[str]) -> str:
    """What a rerun does with the trials stopped mid-way: those with a checkpoint of their
    unfinished training in their folder (``resumable``, spec hashes: runner.resumes) resume from
    it, the others start again: because they write none (train.checkpoint_every_tokens unset) or
    had written none yet."""
    if not stopped:
        return "no trial was stopped mid-way"
    again = [t for t in stopped if t.spec_hash not in resumable]
    if not again:
        return "stopped trials resume from their last checkpoint"
    writing = sum(bool(t.spec.train.checkpoint_every_tokens) for t in again)
    unset = "set train.checkpoint_every_tokens to resume them mid-way"
    why = (f"they write no checkpoints: {unset}" if not writing else
           "they had written no checkpoint yet" if writing == len(again) else
           f"{len(again) - writing} {'writes' if len(again) - writing == 1 else 'write'} no checkpoints ({unset}), "
           f"{writing} had written none yet")
    resume = len(stopped) - len(again)
    if not resume:
        return f"stopped trials start again from the beginning: {why}"
    return (f"{counted(resume, 'stopped trial')} {'resumes' if resume == 1 else 'resume'} from the last "
            f"checkpoint, {len(again)} {'starts' if len(again) == 1 else 'start'} again: {why}")
