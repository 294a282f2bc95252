"""Running a study: the trials that are not done yet, on Ray Tune, tracked by the driver.

One Ray Tune trial = ``train_trial(TrialSpec)`` (foxwb.workbench.run.tune_trial). Trials report through
``tune.report`` (every validation, with the step metrics since the last one, and once at the end
with the arrays); a driver-side Tune callback writes MLflow (foxwb.workbench.run.tracking_callback). A
failing trial reports its reason and ends; the others go on. Trials whose spec hash has a FINISHED
run are skipped, and a trial interrupted mid-way resumes from its checkpoint under
``<workdir>/trials/<spec_hash>``. A tune-then-confirm study runs its search, then its confirmation
(foxwb.workbench.run.confirm chooses the points and builds the trials), one list of trials at a time.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from foxwb.workbench.train import layout
from foxwb.workbench.train.loop import checkpoint_step
from foxwb.workbench.train.trial import code_version
from foxwb.workbench.run import confirm, local_ray, live_view as progress, rerun
from foxwb.workbench.run.driver import Driver
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.study import (StudySpec, Trial, base_variant, design_tags, expand, schedule_notes,
                                        with_point)
from foxwb.workbench.run.tracking import Store, create_local_store, local_tracking_uri, open_store, run_name
from foxwb.workbench.run.tune_trial import search_point, train_search_trial, train_trial


def configure_ray_env() -> None:
    """The environment Ray and Tune are to run the study in, each variable unless it is set
    already. Called by ``run_study`` before it imports Ray: the driver reads them (Tune's settings),
    and the processes Ray starts afterwards inherit them (those of a local Ray, started by the
    driver) or are handed them by Tune (RAY_CHDIR_TO_TRIAL_DIR: a trial's, on a cluster too).
    Set here, not when this module is imported: `wb --help` and the dry run import it too."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Tune's own CSV/JSON/TensorBoard loggers would duplicate what MLflow records.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    # Trials stay in the working directory they start in (on local Ray, the driver's) instead of
    # Tune's per-trial folder, so that data paths relative to where `wb run` ran are found; a trial
    # writes only under its absolute <workdir>/trials/<spec_hash>.
    os.environ.setdefault("RAY_CHDIR_TO_TRIAL_DIR", "0")
    # Between validations a trial reports its progress (tokens, training loss; no val_loss): the
    # scheduler (ASHA) and the searcher skip such results, Tune's strict check would reject them.
    os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
    # The driver's own handler stops a study on Ctrl-C (foxwb.workbench.run.stops): runs KILLED, exit 130.
    os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")
    # Tune's boxed summary of each Tuner (its searcher, scheduler and folder) says nothing the
    # workbench's own lines don't; Tune's older reporter, at verbose=0, prints nothing.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")


def _reuse_actors(study: StudySpec) -> bool:
    """Trials on the CPU share Ray actors (saves the process start and imports per trial). On a
    GPU each trial has a fresh process: compiled CUDA-graph trees (compile's reduce-overhead mode)
    do not survive torch.compiler.reset() in a process that ran another model (the H200 trials
    after the first failed on an AssertionError in a reused actor; docs/performance.md)."""
    return not study.resources.gpu


@dataclass
class Outcome:
    """What the driver knows of one trial of this run: set as it goes by the tracking callback
    (foxwb.workbench.run.tracking_callback), and by the driver for the trials a stop ends."""

    trial: Trial
    status: str = "PENDING"
    reason: str = ""
    val_ppl: float | None = None  # the select split's
    test_ppl: float | None = None  # the test set's, what the table reports
    seconds: float = 0.0
    started: float = field(default_factory=time.time)
    last: dict = field(default_factory=dict)  # the latest intermediate result, for an early stop
    run_id: str = ""  # its tracked run, once started
    resumed_from: tuple[float, int] | None = None  # (when, tokens) it picked up from its checkpoint

    @property
    def resumed(self) -> bool:
        return self.resumed_from is not None

    @property
    def label(self) -> str:
        """The trial's full name in the lines, its MLflow run's name too (tracking.run_name)."""
        return run_name(self.trial)


def _say(line: str) -> None:
    progress.say(line)  # above the running trials' progress lines (foxwb.workbench.run.live_view)


def no_gpu_here(study: StudySpec) -> bool:
    """The study asks for GPUs and this machine, where a local Ray would run it, has none."""
    if study.resources.gpu <= 0:
        return False
    return torch.cuda.device_count() == 0


def cuda_variants(trials: list[Trial]) -> list[str]:
    """The variants whose trials ask ``train.device: cuda``, in order, each once."""
    return list(dict.fromkeys(t.variant for t in trials if t.spec.train.device == "cuda"))


def _base_asks_cuda(study: StudySpec) -> bool:
    """The study's base sets ``train.device: cuda`` (what ``--set train.device=cpu`` edits)."""
    return (study.base.get("train") or {}).get("device") == "cuda"


def no_gpu_ways(study: StudySpec, trials: list[Trial]) -> str:
    """How to run a GPU study from a machine without one: on a GPU machine, on a cluster with GPUs,
    or on the CPU with --set edits (a trial asking cuda fails on a machine without it; --set edits
    the base, so a variant that sets the device itself is named for the file's edit)."""
    hint = "--set resources.gpu=0" + (" --set train.device=cpu" if _base_asks_cuda(study) else "")
    hint = (f"run it on a GPU machine, or with --ray-address of a cluster with GPUs, or, on the CPU instead, pass {hint} "
            "(new spec hashes: no result from the GPU is reused)")
    own = [] if _base_asks_cuda(study) else cuda_variants(trials)
    if own:
        hint += f" and set train.device: cpu in the file for {', '.join(repr(r) for r in own)}"
    return hint


def cuda_without_gpu(study: StudySpec, trials: list[Trial]) -> str | None:
    """Why a local run of ``trials`` fails on this machine though the study asks no GPU: trials
    that ask ``train.device: cuda`` where CUDA is not there (each would fail as it starts). None
    where that is not so."""
    rows = cuda_variants(trials)
    if study.resources.gpu > 0 or not rows or torch.cuda.is_available():
        return None
    fix = "pass --set train.device=cpu (or auto)" if _base_asks_cuda(study) else "set train.device: cpu (or auto) for them in the file"
    return (f"train.device=cuda in the trials of {', '.join(repr(r) for r in rows)}, and this machine has no GPU "
            f"(resources.gpu is {study.resources.gpu:g}: none is reserved for them); {fix}; on a cluster with GPUs, "
            "give resources.gpu as well")


def check_gpus(study: StudySpec, ray_address: str | None, trials: list[Trial]) -> None:
    if study.resources.gpu <= 0:
        if ray_address is None and (why := cuda_without_gpu(study, trials)):
            raise SpecError(why)
        return
    if ray_address is None:
        if no_gpu_here(study):
            raise SpecError(f"resources.gpu={study.resources.gpu}: this machine has no GPU; {no_gpu_ways(study, trials)}")
    else:
        import ray  # Ray is slow to import, and the dry run imports this module: only for a study that runs

        if ray.cluster_resources().get("GPU", 0) == 0:
            raise SpecError(f"resources.gpu={study.resources.gpu}: the Ray cluster at {ray_address} has no GPU")


@dataclass
class StudyRun:
    trials: list[Trial]
    done: dict[str, str]
    outcomes: dict[str, Outcome]
    stopped: str | None = None  # why it stopped before its end (Stops.kind), and in words
    reason: str = ""
    resumable: frozenset[str] = frozenset()  # the stopped trials a rerun resumes from a checkpoint (resumes)


def plan(study: StudySpec, workdir: Path, tracking_uri: str | None) -> tuple[list[Trial], dict[str, str]]:
    """All trials, and the spec hashes already FINISHED in the store (read without creating it)."""
    trials = expand(study)
    store = open_store(workdir, study.experiment, tracking_uri)
    return trials, {} if store is None else store.finished_trials(study.name)


def run_study(study: StudySpec, workdir: Path, *, ray_address: str | None = None, tracking_uri: str | None = None,
              max_concurrent: int | None = None, telemetry=None, progress_seconds: float | None = None,
              trials: list[Trial] | None = None, take_over: bool = False, rerun_selectors: list[str] | None = None,
              report=None) -> StudyRun:
    """Run the study's trials that are not done. ``telemetry`` (a foxwb.workbench.train.telemetry.Telemetry,
    default NVML every 5 s on CUDA) is how each trial samples its GPU; ``progress_seconds``
    (default foxwb.workbench.run.live_view.REPORT_EVERY_S, 0: only at validations) how often a running trial
    reports its tokens and loss between validations. One driver at a time runs a study (its lease,
    foxwb.workbench.run.lease; ``take_over`` takes a stale one); ``rerun_selectors`` (foxwb.workbench.run.rerun) names
    trials to run again from scratch. ``report(StudyRun) -> exit code`` is what prints the summary,
    called by the driver itself where Ray is lost under the study (foxwb.workbench.run.driver). ``trials``:
    these instead of the study's own. A tune-then-confirm study (``search.confirm``) runs in two
    stages, its search and then its confirmation (workbench/run/confirm.py), returned as one StudyRun."""
    configure_ray_env()
    settings = dict(ray_address=ray_address, tracking_uri=tracking_uri, max_concurrent=max_concurrent,
                    telemetry=telemetry, progress_seconds=progress_seconds, take_over=take_over, report=report)
    if trials is None and study.search is not None and study.search.confirm is not None:
        return _search_then_confirmation(study, workdir, rerun_selectors, **settings)
    return _run_trials(study, workdir, trials, rerun_selectors, **settings)


def _search_then_confirmation(study: StudySpec, workdir: Path, rerun_selectors: list[str] | None, **settings) -> StudyRun:
    """The two stages of a tune-then-confirm study: the search (the study without its
    confirmation), then each variant's best point on the confirmation seeds, chosen from the
    store once the search has finished. A driver stopped between them finds the search done on its
    next run and goes on with the confirmation."""
    first = _run_trials(confirm.search_stage(study), workdir, None, rerun_selectors, **settings)
    if first.stopped:
        print(f"study {study.name!r}: stopped during the search; the confirmation follows when the study runs again",
              flush=True)
        return first
    failed = [o for o in first.outcomes.values() if o.status != "FINISHED"]
    if failed:
        # A point the search could not train (a learning rate that diverges) is an answer of the
        # search, not a reason to wait: the choice is among the points that finished. The failed
        # ones run again with the study, as every unfinished trial does.
        names = ", ".join(f"{o.trial.variant} [{o.trial.point_label}]" for o in failed[:5])
        print(f"study {study.name!r}: {progress.count(len(failed), 'search trial')} did not finish ({names}"
              f"{', ...' if len(failed) > 5 else ''}); each variant's choice is made among its finished points",
              flush=True)
    root = workdir.resolve()
    store = Store(settings["tracking_uri"] or local_tracking_uri(root), study.experiment, layout.artifacts(root))
    choices = confirm.best_points(study, store.trial_runs(study.name))
    store.describe_study(store.study_parent(study.name), confirm.choice_tags(study, choices))
    metric = study.search.confirm.metric
    for c in choices.values():
        edge = confirm.edge_note(study, c)
        print(f"confirm  {c.variant}: {c.label}  ({metric} {c.mean:.4f} on the select split over "
              f"{progress.count(c.n_seeds, 'seed')})" + (f"  note: {edge}" if edge else ""), flush=True)
    # No rerun here: a rerun redoes search trials, and the confirmation follows from them.
    second = _run_trials(confirm.confirmation_stage(study), workdir, confirm.confirmation_trials(study, choices), None,
                         **settings)
    # Counted once: a confirmation trial that is a search trial is one trial, and what the first
    # stage finished now was not done before this run.
    searched = {t.spec_hash for t in first.trials}
    done = {**first.done, **{h: r for h, r in second.done.items() if h not in first.outcomes}}
    return replace(second, trials=first.trials + [t for t in second.trials if t.spec_hash not in searched],
                   done=done, outcomes={**first.outcomes, **second.outcomes})


def _run_trials(study: StudySpec, workdir: Path, trials: list[Trial] | None, rerun_selectors: list[str] | None, *,
                ray_address: str | None, tracking_uri: str | None, max_concurrent: int | None, telemetry,
                progress_seconds: float | None, take_over: bool, report) -> StudyRun:
    """One list of trials (None: the study's own) on Ray Tune, those not done yet: the checks,
    the lease, a Tuner per group of trials, the tracking callback writing the store."""
    if ray_address is not None and "RAY_AUTH_MODE" not in os.environ and (Path.home() / ".ray" / "auth_token").exists():
        # `ray start` turns token authentication on and keeps the token in ~/.ray/auth_token; a
        # driver sends it only with RAY_AUTH_MODE=token (Ray 2.60), read when ray is first imported.
        os.environ["RAY_AUTH_MODE"] = "token"
    # Only now: Ray reads RAY_AUTH_MODE (above) and configure_ray_env's variables when first
    # imported, and it takes seconds, which the dry run (importing this module) does without.
    import ray

    workdir = workdir.resolve()
    trials = expand(study) if trials is None else trials
    # Every check runs before the tracking store is touched: a bad study leaves nothing behind.
    if ray_address is not None and not ray.is_initialized():
        ray.init(address=ray_address, log_to_driver=False, configure_logging=False)
    # Importing ray_train sets RAY_TRAIN_V2_ENABLED, which the dry run, importing this module, must
    # not do: imported when a study runs, ahead of the Ray it starts (whose processes inherit it).
    from foxwb.workbench.run.ray_train import check_study

    check_study(study, trials, ray_address)
    check_gpus(study, ray_address, trials)
    workdir.mkdir(parents=True, exist_ok=True)
    if tracking_uri is None:
        create_local_store(workdir)
    store = Store(tracking_uri or local_tracking_uri(workdir), study.experiment, layout.artifacts(workdir))
    code = code_version()
    done = store.finished_trials(study.name)
    todo = to_run(store, study, trials, done)
    if not todo and not rerun_selectors:
        _say(f"study {study.name!r}: {progress.count(len(trials), 'trial')}, {len(trials)} already done, 0 to run")
        return StudyRun(trials, done, {})
    # The lease before anything is written: a second driver leaves the first one's trials alone.
    with Driver(store, store.parent_run(study.name, study.description), study.name, take_over, report) as driver:
        if rerun_selectors:
            hashes = rerun.select(trials, store.trial_runs(study.name), rerun_selectors)
            deleted = rerun.forget(store, study.name, workdir, hashes)
            _say(f"rerun: {progress.count(len(hashes), 'trial')} to run afresh ({progress.count(deleted, 'tracked run')} and their checkpoints deleted)")
            done = store.finished_trials(study.name)
            todo = to_run(store, study, trials, done)
        resuming = sum(resumes(workdir, t) for t in todo)
        from_checkpoints = f" ({resuming} from a checkpoint)" if resuming else ""
        _say(f"study {study.name!r}: {progress.count(len(trials), 'trial')}, {len(trials) - len(todo)} already done, {len(todo)} to run"
             f"{from_checkpoints}")
        for note in schedule_notes(todo):
            _say(f"note: {note}")
        outcomes = {t.spec_hash: Outcome(t) for t in todo if not t.optuna_samples}
        driver.run = run = StudyRun(trials, done, outcomes)
        if not todo:
            return run
        reaped = store.reap_stale(study.name)
        if reaped:
            _say(f"{progress.count(reaped, 'trial run')} left RUNNING by an earlier driver marked KILLED; "
                 f"{'it runs' if reaped == 1 else 'they run'} again")
        parent_id = store.study_run(study.name, study.description, code, base_variant(study.design))
        store.describe_study(parent_id, design_tags(study))
        if not ray.is_initialized():
            # address="local": always a Ray of our own. With no address, ray.init joins the cluster the
            # last `ray start` on this machine recorded (/tmp/ray/ray_current_cluster) or RAY_ADDRESS,
            # and a stale record of a cluster long gone makes it wait on a GCS that never answers.
            local_ray.start(log_to_driver=False)
            driver.stops.install()  # again: ray.init took SIGTERM over (foxwb.workbench.run.stops)
        driver.watch_ray()
        # Imported here: it brings Ray Tune (its base class), which takes seconds to import, and
        # the dry run (which imports this module), the checks and a study with nothing to run
        # need none of it.
        from foxwb.workbench.run.tracking_callback import TrackingCallback

        callback = TrackingCallback(store, driver, outcomes, set(done), _resolver(todo), parent_id=parent_id,
                                    study=study.name, code=code, new_outcome=Outcome)
        plain = run_order([t for t in todo if not t.optuna_samples])
        if study.search is not None and study.search.asha is not None:
            # ASHA compares the trials of one Tuner: one Tuner per variant keeps a weak variant's
            # search from being cut against a strong variant's.
            groups = [[t for t in plain if t.variant == v] for v in dict.fromkeys(t.variant for t in plain)]
        else:
            groups = [plain] if plain else []
        # One Tuner per worker count: its trials share one placement (foxwb.workbench.run.ray_train.tune_placement).
        groups = [[t for t in g if t.spec.train.workers == n] for g in groups
                  for n in sorted({t.spec.train.workers for t in g})]
        stopper = driver.stops.stopper()
        for group in groups:
            if not driver.stops:
                _fit(study, group, workdir, callback, max_concurrent, telemetry, progress_seconds, stopper)
        for template in (t for t in todo if t.optuna_samples):
            if not driver.stops:
                _fit_optuna(study, template, store, workdir, callback, max_concurrent, telemetry, progress_seconds,
                            stopper)
        driver.close()
        run.stopped, run.reason = driver.stops.kind, driver.stops.reason
        if run.stopped:
            run.resumable = frozenset(o.trial.spec_hash for o in outcomes.values()
                                      if o.status == "KILLED" and resumes(workdir, o.trial))
        return run


def resumes(workdir: Path, trial: Trial) -> bool:
    """Whether running ``trial`` again resumes from a checkpoint in its folder: there is one, and
    of a training not yet finished (one of a finished training is not resumed: foxwb.workbench.train.loop)."""
    step = checkpoint_step(layout.trial_dir(workdir, trial.spec_hash) / layout.CHECKPOINT)
    return step is not None and step < trial.spec.train.total_steps(trial.spec.data.context)


def run_order(trials: list[Trial]) -> list[Trial]:
    """Seed by seed, each seed's trials in the design's order: a study stopped part way (a time
    limit, Ctrl-C) leaves whole seeds, which its paired comparisons can use, not whole rows (Ray
    starts queued trials in about this order, not exactly: under load one may start early)."""
    return sorted(trials, key=lambda t: t.seed)


def to_run(store: Store, study: StudySpec, trials: list[Trial], done: dict[str, str]) -> list[Trial]:
    """The trials still to run: not FINISHED (a trial ASHA stopped early is finished), and an Optuna
    search's template until it has its draws."""
    return [t for t in trials if t.spec_hash not in done
            and not (t.optuna_samples and optuna_draws_done(store, study, t) >= t.optuna_samples)]


def _fit(study: StudySpec, trials: list[Trial], workdir: Path, callback, max_concurrent: int | None, telemetry=None,
         progress_s: float | None = None, stopper=None) -> None:
    # Ray Tune takes seconds to import and ray_train sets RAY_TRAIN_V2_ENABLED: neither with this
    # module, which the dry run imports (see _run_trials).
    from ray import tune

    from foxwb.workbench.run.ray_train import tune_placement

    configs = [{"key": t.spec_hash, "spec": t.spec.model_dump_json(), "dir": str(layout.trial_dir(workdir, t.spec_hash)),
                "cpus": study.resources.cpu, "gpu": study.resources.gpu, "progress_s": progress_s} for t in trials]
    scheduler = _asha(study, trials)
    trainable, max_concurrent = tune_placement(study, trials[0].spec.train.workers,
                                               tune.with_parameters(train_trial, telemetry=telemetry), max_concurrent)
    tuner = tune.Tuner(
        trainable,
        param_space={"t": tune.grid_search(configs)},
        tune_config=tune.TuneConfig(
            scheduler=scheduler, max_concurrent_trials=max_concurrent, reuse_actors=_reuse_actors(study),
            trial_name_creator=lambda tr: tr.config["t"]["key"],
            trial_dirname_creator=lambda tr: tr.config["t"]["key"],
        ),
        run_config=_run_config(study, workdir, callback, stopper),
    )
    tuner.fit()


def _resolver(todo: list[Trial]):
    """For grid Tuners: the trial is the grid value's key."""
    by_hash = {t.spec_hash: t for t in todo}
    return lambda config: by_hash[config["t"]["key"]]


def _prior_draws(store: Store, study: StudySpec, template: Trial) -> list:
    runs = store.finished_runs_of(study.name, template.variant, template.seed)
    return [r for r in runs if r.data.tags.get("search_point") and "val_loss" in r.data.metrics]


def optuna_draws_done(store: Store, study: StudySpec, template: Trial) -> int:
    return len(_prior_draws(store, study, template))


def _fit_optuna(study: StudySpec, template: Trial, store: Store, workdir: Path, callback, max_concurrent,
                telemetry=None, progress_s: float | None = None, stopper=None) -> None:
    """An Optuna search for one (variant, seed), warm-started with the draws already finished."""
    # Ray Tune (and Optuna through it) takes seconds to import: not with this module, which the
    # dry run imports.
    from ray import tune
    from ray.tune.search.optuna import OptunaSearch

    search = study.search
    prior = _prior_draws(store, study, template)
    own_space = search.space_of(template.variant)
    points = [{p.replace(".", "__"): _param_value(r.data.params[p]) for p in own_space} for r in prior]
    space = {p.replace(".", "__"): d.tune_domain() for p, d in own_space.items()}
    # Draws of the variant's own, as a random search's (study._search_points): seeded by the search
    # seed and the variant; a new seed per resumption, as the same seed would start by drawing the
    # finished points again.
    own = int(np.random.default_rng([search.seed, *template.variant.encode()]).integers(2 ** 31))
    searcher = _on_validations(OptunaSearch)(metric="val_loss", mode="min", seed=own + len(prior),
                            points_to_evaluate=points or None,
                            evaluated_rewards=[r.data.metrics["val_loss"] for r in prior] or None)
    scheduler = _asha(study, [template])
    callback.resolve_by(lambda config: with_point(template, search_point(config)))
    trainable = tune.with_parameters(train_search_trial, template=template.spec.model_dump_json(),
                                     workdir=str(workdir), cpus=study.resources.cpu, telemetry=telemetry,
                                     progress_s=progress_s, gpu=study.resources.gpu)
    from foxwb.workbench.run.ray_train import tune_placement  # it sets RAY_TRAIN_V2_ENABLED: see _run_trials

    trainable, max_concurrent = tune_placement(study, template.spec.train.workers, trainable, max_concurrent)
    tuner = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(search_alg=searcher, scheduler=scheduler,
                                    num_samples=template.optuna_samples - len(prior),
                                    max_concurrent_trials=max_concurrent, reuse_actors=_reuse_actors(study)),
        run_config=_run_config(study, workdir, callback, stopper),
    )
    tuner.fit()


def _on_validations(searcher_class):
    """The searcher, deaf to a trial's progress results (no val_loss; OptunaSearch would fail on them)."""

    class OnValidations(searcher_class):
        def on_trial_result(self, trial_id: str, result: dict):
            if self.metric in result:
                super().on_trial_result(trial_id, result)

    return OnValidations


def _param_value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _asha(study: StudySpec, trials: list[Trial]):
    from ray.tune.schedulers import ASHAScheduler  # Ray Tune is slow to import: see _fit

    if study.search is None or study.search.asha is None:
        return None
    # max_t past the end: ASHA cuts at its rungs only, never at the last validation, so a
    # surviving trial reaches its final evaluation.
    return ASHAScheduler(time_attr="tokens", metric="val_loss", mode="min",
                         max_t=2 * max(t.spec.train.tokens for t in trials),
                         grace_period=study.search.asha.grace_tokens,
                         reduction_factor=study.search.asha.reduction_factor)


def _run_config(study: StudySpec, workdir: Path, callback, stopper=None):
    """Tune's run settings, the same for every Tuner of a study."""
    from ray import tune  # Ray Tune is slow to import: see _fit

    # Tune's result grid looks for the file loggers we turned off and warns per trial; the store
    # holds the results, so those warnings say nothing.
    logging.getLogger("ray.tune").setLevel(logging.ERROR)
    return tune.RunConfig(name=study.name.replace("/", "_"), storage_path=str(layout.ray_dir(workdir)), verbose=0,
                          callbacks=[callback], failure_config=tune.FailureConfig(max_failures=0), stop=stopper)
