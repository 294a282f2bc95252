"""``wb train``: one trial end to end in this process (or on N workers through Ray Train), its
folder locked while it runs; Ctrl-C, SIGTERM and SIGHUP stop it resumably."""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from foxwb.workbench.spec import overrides
from foxwb.workbench.spec.trial import FEWER_SEQUENCES, TrialSpec, load_trial
from foxwb.workbench.train import faults, layout
from foxwb.workbench.train.folder_lock import FolderLock
from foxwb.workbench.train.loop import TrainError
from foxwb.workbench.train.trial import run_trial


def stop_as_ctrl_c() -> None:
    """SIGTERM (`kill`, a batch scheduler's end of a job) and SIGHUP (the terminal closed) stop
    `wb train` as Ctrl-C does: its folder lock given back, exit 130 (not killed outright). Under
    `nohup` SIGHUP stays ignored."""
    def stop(signum, frame):
        if signum == signal.SIGHUP:
            faults.silence_output()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:
        signal.signal(signal.SIGHUP, stop)


def train_into(args: argparse.Namespace, trial: TrialSpec, out: Path) -> dict | None:
    """Train ``trial`` into ``out`` (held by this process): its result, or None after a training
    error said on stderr."""
    if not args.resume and (out / layout.CHECKPOINT).exists():
        (out / layout.CHECKPOINT).unlink()
    print(f"trial {trial.spec_hash()}  ->  {out}", file=sys.stderr)
    note = trial.train.warmup_note(trial.data.context)
    if note:
        print(f"note: {note}", file=sys.stderr)
    stop_as_ctrl_c()
    try:
        if trial.train.workers > 1:
            # Ray Train, imported for N workers only (see above).
            from foxwb.workbench.run.ray_train import run_workers

            result = run_workers(trial, out)
        else:
            result = run_trial(trial, out, progress=True)
    except TrainError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    except KeyboardInterrupt:
        if (out / layout.CHECKPOINT).exists():
            print(f"\nstopped: `wb train {args.trial}{overrides.shown(args.overrides)} --out {out}` again resumes from "
                  "its last checkpoint", file=sys.stderr)
        raise
    return result


def command(args: argparse.Namespace) -> int:
    trial = load_trial(args.trial, args.overrides)
    if args.workers is not None:
        # Ray Train only for a trial of several workers: its module sets RAY_TRAIN_V2_ENABLED, which
        # must precede Ray Train's first import, and a one-process trial has no business doing that.
        from foxwb.workbench.run.ray_train import with_workers

        trial = with_workers(trial, args.workers, "--workers")
    out = Path(args.out)
    faults.check_folder(out, "--out", write=True)
    with FolderLock(out) as lock:
        if not lock.held:
            print(f"error: --out {out} is in use by another `wb train`: two trials writing one folder would mix "
                  "their checkpoints and metrics; wait for it to end or give another --out", file=sys.stderr)
            return 2
        result = None
        try:
            result = train_into(args, trial, out)
        finally:
            if result is None:
                # A trial that failed before it wrote a file leaves no empty --out of its own making.
                lock.remove_if_empty()
        if result is None:
            return 1
    rate = f"{result['tokens_per_s']:,.0f} tokens/s" if result["tokens_per_s"] else "n/a"
    mfu = f", MFU {100 * result['mfu']:.1f}%" if result["mfu"] else ""
    if result.get("test_loss") is not None:
        print(f"test_loss {result['test_loss']:.4f} nats/token (ppl {result['test_ppl']:.3f}) on {result['test_tokens']:,} "
              f"test tokens, {result['test_documents']} documents; val_loss {result['val_loss']:.4f} on the select split")
    else:
        print(f"val_loss {result['val_loss']:.4f} nats/token (ppl {result['val_ppl']:.3f})")
    print(f"unigram entropy {result['unigram_entropy']:.4f}; {rate}{mfu}; {result['n_params']:,} params")
    for length, ppl in result["ppl_at_length"].items():
        print(f"  P({length}) = {ppl:.3f}")
    if result.get("eval_sequences", 0) < result.get("eval_sequences_asked", 0):
        print(f"note: validated on {result['eval_sequences']} of the {result['eval_sequences_asked']} select-split sequences "
              f"eval.sequences asks: {FEWER_SEQUENCES}")
    print(f"wrote {out / 'result.json'}")
    return 0
