"""lm-evaluation-harness tasks run on an opened trial (trial_folder.open_trial) through lm-eval's own
evaluator, offline, from task YAMLs on disk: the shipped ``wb_next_line``, a ``--tasks-dir`` of the
user's, and lm-eval's own task files (indexed only when a task is named that the others lack: the
index of its ~15,000 files takes half a minute)."""
from __future__ import annotations

import difflib
import logging
import random
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

from foxwb.workbench.downstream import items, local_task
from foxwb.workbench.downstream.lm import WorkbenchLM
from foxwb.workbench.downstream.items import EVAL_DIR
from foxwb.workbench.downstream.trial_folder import OpenTrial
from foxwb.workbench.spec.errors import SpecError

# Resamples for lm-eval's bootstrap stderr of metrics that are not means (perplexities); a mean's
# stderr (acc) is computed directly.
BOOTSTRAP = 1000
FEWSHOT_SEED = 1234  # lm-eval's default


def task_manager(names: list[str], include: list[Path]):
    """A TaskManager that knows every task of ``names``: from ``include`` alone where they are
    there, else with lm-eval's own task files too. A name none of them has is a SpecError."""
    # lm_eval takes seconds to import; `wb results` imports this package's comparison without it.
    from lm_eval.tasks import TaskManager

    paths = [str(p) for p in include]
    manager = TaskManager(include_path=paths or None, include_defaults=False)
    if all(n in manager.all_tasks for n in names):
        return manager
    manager = TaskManager(include_path=paths or None, include_defaults=True)
    for name in names:
        if name not in manager.all_tasks:
            # The shipped task is known by name even where it was not included (not asked for).
            close = difflib.get_close_matches(name, [*manager.all_tasks, local_task.TASK], n=3)
            hint = f"; close: {', '.join(close)}" if close else ""
            raise SpecError(f"--task {name!r}: no such lm-eval task among {local_task.TASK}, --tasks-dir "
                            f"{include[-1] if include else '(none)'} and lm-eval's own{hint}")
    return manager


def check_tasks_dir(tasks_dir: str | None) -> Path | None:
    if tasks_dir is None:
        return None
    path = Path(tasks_dir).expanduser()
    if not path.is_dir():
        raise SpecError(f"--tasks-dir {tasks_dir}: no such folder; give a folder of lm-eval task YAML files")
    return path


def run_tasks(trial: OpenTrial, names: list[str], tasks_dir: Path | None = None, limit: int | None = None,
              batch_size: int = 16) -> dict[str, dict]:
    """Evaluate ``trial`` on the tasks ``names`` (a group names its tasks); write each task's
    per-item file and metrics into TRIAL/eval/ and return {task: its metrics file's content}."""
    # Late for the reason task_manager's is.
    from lm_eval import evaluator

    logging.getLogger("lm_eval").setLevel(logging.WARNING)
    include = ([local_task.task_folder(trial.data)] if local_task.TASK in names else []) + ([tasks_dir] if tasks_dir else [])
    loaded = task_manager(names, include).load(names)
    for task in loaded["tasks"].values():
        # What lm-eval's simple_evaluate does before it evaluates: zero-shot unless the task says
        # otherwise, few-shot examples drawn by a fixed seed.
        if task.get_config("num_fewshot") is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=FEWSHOT_SEED)
    random.seed(0)
    np.random.seed(FEWSHOT_SEED)
    torch.manual_seed(FEWSHOT_SEED)
    lm = WorkbenchLM(trial.model, trial.data.tokenizer, trial.spec.data.context, trial.device, trial.autocast,
                     batch_size, trial.spec.eval.test_stride)
    found = evaluator.evaluate(lm=lm, task_dict=loaded, limit=limit, bootstrap_iters=BOOTSTRAP, log_samples=True)
    out = {}
    for name in loaded["tasks"]:
        records = [items.item_record(s) for s in found["samples"].get(name, [])]
        summary = {"task": name, "spec_hash": trial.spec_hash, "metrics": items.task_metrics(found["results"][name]),
                   "items": len(records), "items_in_task": found["n-samples"][name]["original"], "limit": limit,
                   "task_version": found["versions"].get(name), "lm_eval_version": version("lm_eval"),
                   "context": trial.spec.data.context, "device": str(trial.device), "lm_eval_result": found["results"][name]}
        items.write(trial.folder / EVAL_DIR, name, records, summary)
        out[name] = summary
    return out
