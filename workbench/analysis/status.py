"""`wb status`: every trial of a study and its state, read from the tracking store: running (tokens
done, last training loss, ETA), finished, failed with its reason, killed, or still to run; and a
trial whose GPU sat under 50% busy. A running trial reports its tokens and loss every few seconds
(foxwb.workbench.run.live_view.REPORT_EVERY_S), each step's metrics stamped with the time the step ended."""
from __future__ import annotations

import time
from dataclasses import dataclass

from foxwb.workbench.run import lease
from foxwb.workbench.run.live_view import count, eta_s, format_eta, format_seconds
from foxwb.workbench.run.tracking import Store

GPU_BUSY_BELOW = 50.0  # % of the time the GPU ran a kernel (NVML utilisation)
GPU_SAMPLES = "system/gpu_0_utilization_percentage"
QUIET_S = 300  # a running trial silent this long may have lost its driver


@dataclass
class TrialState:
    label: str  # variant [searched values] / seed
    spec_hash: str
    state: str  # finished, stopped, running, failed, killed, to run
    detail: str = ""  # finished: val_ppl; running: tokens, loss, ETA; failed, killed: the reason
    gpu: str = ""  # the flag of a GPU under GPU_BUSY_BELOW % busy, else ""


def no_driver(store: Store | None, study: str, now: float | None = None) -> str | None:
    """Why no driver runs ``study`` (lease.no_driver of its parent run's lease), or None: one does,
    or the study has no parent run (nothing ran)."""
    parent = store.study_parent(study) if store is not None else None
    return None if parent is None else lease.no_driver(lease.read(store.client, parent), now)


def _label(tags: dict) -> str:
    point = f" [{tags['search_point']}]" if tags.get("search_point") else ""
    return f"{tags['variant']}{point} / seed {tags['seed']}"


def _resolve(runs: list):
    """The run that says a spec hash's state: a finished one if any, else a running one, else the latest."""
    runs = sorted(runs, key=lambda r: r.info.start_time or 0)
    return next((r for r in runs if r.info.status == "FINISHED"), None) or next(
        (r for r in runs if r.info.status == "RUNNING"), None) or runs[-1]


def _by_hash(runs: list) -> dict[str, list]:
    """spec_hash -> its runs (a trial's attempts)."""
    by_hash: dict[str, list] = {}
    for r in runs:
        by_hash.setdefault(r.data.tags["spec_hash"], []).append(r)
    return by_hash


def final_statuses(runs: list) -> dict[str, str]:
    """spec_hash -> the MLflow status of the run that says its state (FINISHED, FAILED, ...): each
    trial once, however many attempts and rows it has."""
    return {h: _resolve(rs).info.status for h, rs in _by_hash(runs).items()}


def trial_states(store: Store, runs: list, planned: list | None = None, now: float | None = None,
                 no_driver: str | None = None) -> list[TrialState]:
    """One state per trial: the ``planned`` ones (study.Trial, in the study's order) first, then
    any tracked spec hash the plan does not hold (an adaptive search's draws, say). ``no_driver``
    (lease.no_driver): why no driver runs the study; its runs still RUNNING are then stalled."""
    now = time.time() if now is None else now
    by_hash = _by_hash(runs)
    out, seen = [], set()
    for t in planned or []:
        if t.optuna_samples:
            continue
        seen.add(t.spec_hash)
        if t.spec_hash in by_hash:
            state = run_state(store, _resolve(by_hash[t.spec_hash]), now, no_driver)
            state.label = f"{t.row} / seed {t.seed}"  # the file's name, should the run's differ (renamed)
            out.append(state)
        else:
            out.append(TrialState(f"{t.row} / seed {t.seed}", t.spec_hash, "to run"))
    extra = sorted((h for h in by_hash if h not in seen), key=lambda h: min(r.info.start_time or 0 for r in by_hash[h]))
    return out + [run_state(store, _resolve(by_hash[h]), now, no_driver) for h in extra]


def run_state(store: Store, run, now: float, no_driver: str | None = None) -> TrialState:
    tags, status = run.data.tags, run.info.status
    state = TrialState(_label(tags), tags["spec_hash"], status.lower(), gpu=gpu_flag(store, run))
    if status == "FINISHED":
        if tags.get("stopped_early") == "true":
            state.state, state.detail = "stopped", "stopped early by ASHA"
        elif "val_ppl" in run.data.metrics:
            state.detail = f"val_ppl {run.data.metrics['val_ppl']:.3f}"
    elif status == "RUNNING" and no_driver:
        # A driver killed outright (SIGKILL, a lost machine) closes nothing: its runs stay RUNNING
        # until the next `wb run` marks them KILLED and runs them again.
        state.state, state.detail = "stalled", f"{no_driver}; `wb run` runs it again"
    elif status == "RUNNING":
        state.detail = running_detail(store, run, now)
    else:
        lines = [line for line in tags.get("error", "").strip().splitlines() if line.strip()]
        state.detail = (lines[-1].strip() if lines else "no reason recorded")[:200]
    return state


def running_detail(store: Store, run, now: float) -> str:
    """Tokens done of the trial's total, the last training loss, the ETA (`progress_line.eta_s`, as
    `wb train` and `wb run` read it), and how long ago it last reported."""
    history = store.client.get_metric_history(run.info.run_id, "train_loss")
    # The tokens it trains, as its driver recorded them (a run started before that tag: those asked).
    total = int(run.data.tags.get("trained_tokens") or run.data.params.get("train.tokens", 0))
    if not history:
        return f"starting (0/{total:,} tokens)"
    history = sorted(history, key=lambda m: m.step)
    last, start = history[-1], run.info.start_time
    # A trial resumed from its checkpoint sent the steps up to it again, with the times they were
    # first trained at: its rate counts from the resume, as `wb run`'s does.
    resumed_at = int(run.data.tags.get("resumed_tokens", 0))
    own = [m for m in history if m.step > resumed_at]
    # The rate from its first step (since the resume) to its last, the same ETA as `wb run` shows:
    # loading and compiling come before the first step ends, and are left out; "estimating..." until
    # a second step.
    origin = (own[0].timestamp / 1000, own[0].step) if own else None
    eta = eta_s(total, origin, (last.timestamp / 1000, last.step), now)
    quiet = max(0.0, now - max(last.timestamp, start) / 1000)
    text = (f"{last.step:,}/{total:,} tokens ({100 * last.step / max(total, 1):.0f}%)  loss {last.value:.3f}  "
            f"eta {format_eta(eta)}")
    if quiet > QUIET_S:
        text += f"  (no report for {format_seconds(quiet)}: is its driver still running?)"
    return text


def gpu_flag(store: Store, run) -> str:
    """'GPU 23% busy (under 50%)' from the trial's mean utilisation (final metric) or, while it
    runs, the mean of its GPU samples; '' at or above 50%, and where there is no GPU metric (CPU)."""
    busy = run.data.metrics.get("gpu_utilization_mean")
    if busy is None and GPU_SAMPLES in run.data.metrics:
        samples = [m.value for m in store.client.get_metric_history(run.info.run_id, GPU_SAMPLES)]
        busy = sum(samples) / len(samples) if samples else None
    if busy is None or busy >= GPU_BUSY_BELOW:
        return ""
    return f"GPU {busy:.0f}% busy (under {GPU_BUSY_BELOW:.0f}%)"


def summary(states: list[TrialState]) -> str:
    counts: dict[str, int] = {}
    for s in states:
        counts[s.state] = counts.get(s.state, 0) + 1
    order = ["running", "stalled", "finished", "stopped", "failed", "killed", "to run"]
    return ", ".join(f"{counts[k]} {k}" for k in order if k in counts)


def lines(study: str, states: list[TrialState]) -> list[str]:
    """The study's heading and a line per trial, names in full."""
    width = max((len(s.label) for s in states), default=0)
    out = [f"study {study!r}: {count(len(states), 'trial')}: {summary(states) or 'none tracked'}"]
    for s in states:
        gpu = f"  [{s.gpu}]" if s.gpu else ""
        out.append(f"  {s.state:<8}  {s.label:<{width}}  {s.spec_hash}  {s.detail}{gpu}".rstrip())
    return out
