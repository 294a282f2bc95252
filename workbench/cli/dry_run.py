"""``wb run --dry-run``: a study's trials, their spec hashes and state in the store, the
confirmation to come, and with --effect the seeds that would detect it from the pilot runs' spread.
It reads the store through the analysis stage (polars), which `wb run` itself does without."""
from __future__ import annotations

import argparse
from pathlib import Path

from foxwb.workbench.analysis import report, runs as results, sequential, status, table
from foxwb.workbench.cli import seed_plan
from foxwb.workbench.cli.study_runs import check_metric, results_of
from foxwb.workbench.data import test_check
from foxwb.workbench.run import live_view, rerun
from foxwb.workbench.run.confirm import choose, confirmation_trials, edge_note
from foxwb.workbench.run.runner import cuda_without_gpu, no_gpu_ways, no_gpu_here, optuna_draws_done, to_run
from foxwb.workbench.spec import overrides
from foxwb.workbench.spec.cost import flops_per_token, param_counts
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.study import expand, schedule_notes, variant_names


def dry_run(study, workdir: Path, args: argparse.Namespace) -> int:
    """The trials, their spec hashes and state in the store; with --effect, the seeds that would
    detect it, from the pilot runs' spread."""
    if getattr(args, "base", None) is not None:  # checked before anything is printed
        if args.effect is None:
            raise SpecError("--base goes with --effect (the variant the effect is measured against)")
        table.check_variant(args.base, study.name, variant_names(study), "--base")
    trials = expand(study)
    store = results.read_store(workdir, study.name, study.experiment, args.tracking_uri)
    runs = results.all_runs(store, study.name) if store is not None else []
    gone = status.no_driver(store, study.name)
    states = {s.spec_hash: s for s in status.trial_states(store, runs, trials, no_driver=gone)}
    # Done as `wb run` counts it (a trial ASHA stopped early is done; an Optuna search once it has
    # its draws); the states in brackets are this stage's trials', not the confirmation's.
    todo = trials if store is None else to_run(store, study, trials, store.finished_trials(study.name))
    done = len(trials) - len(todo)
    parts = [status.summary([states[t.spec_hash] for t in trials if t.spec_hash in states])]
    optuna = [t for t in trials if t.optuna_samples]
    if optuna:
        drawn = 0 if store is None else sum(min(optuna_draws_done(store, study, t), t.optuna_samples) for t in optuna)
        parts.append(f"{drawn} of {sum(t.optuna_samples for t in optuna)} optuna draws finished")
    parts = ", ".join(p for p in parts if p)
    print(f"study {study.name!r}: {live_view.count(len(trials), 'trial')}, {done} done" + (f" ({parts})" if parts else ""))
    stale = rerun.stale_trials(trials, runs)  # components' sources changed since they ran
    # Where the seed plan stands, judged from the store (None: no look has run).
    where, changed = None, None
    if study.plan() is not None and store is not None:
        where = seed_plan.standing(study, workdir, args.tracking_uri)
        changed = seed_plan.changed_plan(study, workdir, args.tracking_uri)  # what `wb run` refuses
    names = [t.row for t in trials]
    width = max(len("variant"), *map(len, names))
    print(f"{'variant':<{width}} {'seed':>4}  {'spec hash':<16}  {'params':>12}  {'tokens':>13}  {'train FLOPs':>11}  status")
    for t, name in zip(trials, names):
        s = states.get(t.spec_hash)
        text = "done" if s is None or s.state == "finished" else \
            "done (stopped early by ASHA)" if s.state == "stopped" else s.state
        if s is not None and s.state in ("running", "stalled", "failed", "killed") and s.detail:
            text += f": {s.detail}"
        if t.spec_hash in stale and text == "done":
            text = f"done, {stale[t.spec_hash]}"
        if t.optuna_samples:
            text = f"optuna search of {t.optuna_samples} draws"
        if study.seed_plan is not None and s is None:
            text = seed_plan.status_of(study.seed_plan, t.seed, where) or text
        also = f"  (also: {', '.join(t.aliases)})" if t.aliases else ""
        tokens = t.spec.train.trained_tokens(t.spec.data.context)  # train.tokens in whole steps, as trained
        flops = flops_per_token(t.spec.model, t.spec.data.context)["train"] * tokens
        print(f"{name:<{width}} {t.seed:>4}  {t.spec_hash:<16}  {param_counts(t.spec.model)['total']:>12,}  "
              f"{tokens:>13,}  {flops:>11.3g}  {text}{also}")
    for note in schedule_notes(trials):
        print(f"note: {note}")
    if study.plan() is not None:
        print("\n".join(plan_lines(study, trials) + [seed_plan.standing_line(study, where)]))
        if changed:
            print(f"REFUSED: {changed}")
    if stale:
        print(f"note: {live_view.count(len(stale), 'finished trial')} ran with component code that has changed since "
              f"(docs/models.md, \"Stale results\"): `wb run {args.study}{overrides.shown(args.overrides)} --rerun stale` "
              "runs them again")
    checks = test_check.check_trials(trials)
    for line in test_check.lines(checks):  # docs/trials-and-data.md, "Three splits"
        print(line)
    if done < len(trials) and getattr(args, "ray_address", None) is None:
        if no_gpu_here(study):  # what runner.check_gpus refuses a local run for
            print(f"note: the study asks resources.gpu={study.resources.gpu} a trial and this machine has no GPU: "
                  f"`wb run` here stops at once; {no_gpu_ways(study, trials)}")
        elif why := cuda_without_gpu(study, trials):
            print(f"note: `wb run` here stops at once: {why}")
        else:
            # Imported here, not with this module: importing ray_train sets RAY_TRAIN_V2_ENABLED (it
            # must come before Ray Train's own imports), which a dry run of a study of one-worker
            # trials has no business doing.
            from foxwb.workbench.run.ray_train import check_study

            try:
                check_study(study, trials, None)
            except SpecError as e:
                print(f"note: `wb run` here stops at once: {e}")
    if study.search is not None and study.search.confirm is not None:
        confirm_lines(study, store, runs, done == len(trials), gone, where)
    if getattr(args, "rerun", None):
        hashes = rerun.select(trials, runs, args.rerun)  # a selector that names nothing is refused here too
        print(f"--rerun would delete the tracked runs and checkpoints of {live_view.count(len(hashes), 'trial')} and run them "
              f"afresh: {', '.join(sorted(hashes)) or 'none'}")
    if args.effect is not None:
        plan_seeds(study, args)
    if any(c.refusal for c in checks) or changed:  # what `wb run` refuses: the exit code says so too
        print("`wb run` refuses this study as it stands (REFUSED above)")
        return 2
    return 0


def plan_lines(study, trials) -> list[str]:
    """The seed plan: its looks, the level each tests at, and what it costs at the least and the most
    (a confirmation's plan: the search's trials, then each variant's chosen point on the look's seeds)."""
    plan = study.plan()
    flops = lambda ts: sum(flops_per_token(t.spec.model, t.spec.data.context)["train"]
                           * t.spec.train.trained_tokens(t.spec.data.context) for t in ts)
    if study.seed_plan is not None:
        whose, least, most, listed = "", [t for t in trials if t.seed in plan.seeds_at(plan.start)], trials, "the rows above list the most"
    else:
        one = {}  # a search trial of each variant stands for its confirmation trials' cost
        for t in trials:
            one.setdefault(t.variant, t)
        least = trials + [t for t in one.values() for _ in range(plan.start)]
        most = trials + [t for t in one.values() for _ in range(plan.max)]
        whose, listed = " (the confirmation's)", "the search's trials above, then the confirmation's"
    seeds = lambda n: f"{plan.first}" if n == 1 else f"{plan.first}-{plan.first + n - 1}"
    return [f"seeds by plan{whose}: looks at {', '.join(map(str, plan.looks))} seeds (seeds {seeds(plan.start)} first, "
            f"at most {seeds(plan.max)}); each look tests at {sequential.nominal_alpha(plan, study.alpha):.4f}, so that "
            f"alpha {study.alpha:g} holds over all of them; a claim is final at the first look that decides it "
            "(docs/statistics.md, \"Seeds by plan\")",
            f"cost: {len(least)} trials ({flops(least):.3g} train FLOPs) if the first look decides every claim, at most "
            f"{len(most)} ({flops(most):.3g}); {listed}"] + (
        ["note: the plan starts at 2 seeds: a paired t of 2 seeds has one degree of freedom and rarely decides; "
         "start at 3 or more"] if plan.start == 2 else []) + (
        [f"note: the confirmation's seeds {sorted(reused)} are the search's: a choice's luck on its own seed enters "
         "the verdict; leave `first` out to confirm on fresh seeds"] if (reused := set(plan.seeds) & set(study.seeds))
        and study.seed_plan is None else [])


def confirm_lines(study, store, runs: list, searched: bool, gone: str | None, where: tuple[int, bool] | None) -> None:
    """The confirmation stage of a tune-then-confirm study: its trials once the search has
    finished (each variant's chosen point, workbench/run/confirm.py), else what it will be; ``gone``:
    status.no_driver of the study, read once by the dry run; ``where``: where its seed plan stands."""
    confirm = study.search.confirm
    choices = choose(study, runs) if searched else {}
    if not choices:
        each = "each cell's (a variant at a point)" if study.design.kind == "crossed" else "each variant's"
        on = (f"by plan (seeds {', '.join(map(str, confirm.seed_plan.seeds_at(confirm.seed_plan.start)))} first)"
              if confirm.seed_plan is not None else ', '.join(map(str, confirm.seeds)))
        print(f"then the confirmation: {each} best search point by {confirm.metric} on seeds {on} (chosen once the "
              "search has finished)")
        return
    print(f"then the confirmation, at each {'cell' if study.design.kind == 'crossed' else 'variant'}'s best search point "
          f"by {confirm.metric}:")
    trials = confirmation_trials(study, choices)
    plan = confirm.seed_plan
    states = {s.spec_hash: s for s in status.trial_states(store, runs, trials, no_driver=gone)}
    for t in trials:
        s = states.get(t.spec_hash)
        text = "to run" if s is None else "done" if s.state == "finished" else s.state
        if plan is not None and text == "to run":
            text = seed_plan.status_of(plan, t.seed, where) or text
        print(f"  {t.variant} [{t.point_label}]  seed {t.seed}  {t.spec_hash}  {text}")
    for c in choices.values():
        edge = edge_note(study, c)
        if edge:
            print(f"note: {c.variant}: {edge}")


def plan_seeds(study, args: argparse.Namespace) -> None:
    _, _, runs, tags, trials = results_of(args.study, args)
    if runs.is_empty() or not (runs["status"] == "FINISHED").any():
        print(f"\n--effect {args.effect}: no finished pilot runs of {study.name!r} to measure the seeds' spread from")
        return
    args.metric = args.metric or table.report_metric(runs)
    check_metric(runs, args.metric)
    info = table.study_info(study.name, runs, study, tags, args.base, trials=trials)
    print()
    print("\n".join(report.seeds_lines(table.study_table(runs, info, args.metric), info, args.metric, args.effect)))
