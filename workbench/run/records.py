"""What a study records in MLflow beyond its metrics, for it to be reproduced and read
(docs/running-studies.md, "Tracking"): the versions of the libraries that decide a result (tags
``version.<library>`` of the study's parent run), the corpus each trial read (an MLflow dataset
input of its run) and the study page's figures (artifacts ``figures/<name>.html`` of the parent run,
logged by ``wb dashboard``). Written through foxwb.workbench.run.tracking.Store.
"""
from __future__ import annotations

import hashlib
import json
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path, PurePath
from urllib.parse import unquote, urlparse

VERSION_TAG = "version."  # prefix of the parent run's version tags
FIGURES = "figures"  # the parent run's artifact folder of the study page's figures
# The data spec's fields that say where its documents come from (the rest says how they are cut).
WHERE = ("sources", "paths", "val_paths", "train", "val", "path", "split", "val_split")


def version_tags() -> dict[str, str]:
    """``version.<name>`` -> version of Python, of each library of foxwb.workbench.train.trial.LIBRARIES
    installed here, and of the workbench itself (its distribution, git commit and source fingerprint)."""
    # Imported here: trial.py imports torch, which a reader of the store does without.
    from foxwb.workbench.train.trial import versions

    found = versions()
    try:
        found["workbench"] = version("fox-workbench")
    except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed: the commit says it
        pass
    return {VERSION_TAG + name: str(value) for name, value in found.items()}


def dataset_inputs(result: dict) -> list:
    """The MLflow dataset inputs of a finished trial's ``result`` (its result.json): what it trained
    on (context ``training``; digest: the corpus's ``sha256`` where the result records one, as for
    the built-in corpus, else the data spec's) and, where it was scored on a test split, that split
    (context ``evaluation``, digest: the result's ``test_digest``). None without the trial's spec
    (a trial ASHA stopped sends no result)."""
    # MLflow is slow to import (tracking.py): only when a trial's inputs are logged.
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    data = (result.get("spec") or {}).get("data")
    if not data:
        return []
    name, source_type, source = describe(data, result.get("corpus") or {})
    corpus = (result.get("corpus") or {}).get("sha256")
    profile = {"digest_of": "the corpus's documents" if corpus else "the data spec (the data are not hashed)",
               "train_tokens_available": result.get("train_tokens_available")}
    # MLflow keeps a dataset digest of 36 characters at most: an English set's sha256 (64) is cut to
    # the 16 digits the built-in corpus's has, the whole of it in the source.
    digest = (corpus or spec_digest(data))[:16]
    out = [DatasetInput(Dataset(name, digest, source_type, source, profile=json.dumps(profile)),
                        tags=[InputTag(MLFLOW_DATASET_CONTEXT, "training")])]
    test = result.get("test_digest")
    if test and test != digest:
        profile = {"digest_of": "the test split's scored tokens", "documents": result.get("test_documents"),
                   "tokens": result.get("test_tokens")}
        out.append(DatasetInput(Dataset(name, test, source_type, source, profile=json.dumps(profile)),
                                tags=[InputTag(MLFLOW_DATASET_CONTEXT, "evaluation")]))
    return out


def describe(data: dict, corpus: dict) -> tuple[str, str, str]:
    """(name, source type, source) of a data spec (its JSON): the name is its kind and what it
    reads (``builtin:stdlib``, ``text:notes.md+2``, ``tokens:train.bin``); the source, as JSON, the
    fields that say where its documents lie (and which Python's standard library a built-in corpus is)."""
    kind = data.get("kind", "builtin")
    where = {k: data[k] for k in WHERE if data.get(k) not in (None, [], "")}
    if kind == "builtin":
        where["python"] = corpus.get("python")
        return f"builtin:{data.get('sources', 'stdlib')}", "builtin", json.dumps(where)
    if kind == "english":  # a pinned set: its name, and the file's digest in the profile
        return f"english:{data.get('set', 'core')}", "local", json.dumps({**where, "sha256": corpus.get("sha256")})
    if kind == "mqar":  # generated from the spec's own numbers
        return "mqar", "synthetic", json.dumps({k: v for k, v in data.items() if k != "kind"})
    paths = data.get("paths") or [data.get("train") or data.get("path") or ""]
    shown = PurePath(paths[0]).name + (f"+{len(paths) - 1}" if len(paths) > 1 else "")
    if data.get("split"):
        shown += f"[{data['split']}]"
    return f"{kind}:{shown}", "local", json.dumps(where)


def spec_digest(data: dict) -> str:
    """16 hex digits of the SHA-256 of a data spec's JSON, keys sorted."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def log_figures(client, run_id: str, figures: dict, artifact_root: Path | None = None) -> None:
    """Each plotly figure of ``figures`` (name -> figure) as ``figures/<name>.html`` of the run,
    in one upload, replacing the one of that name; then a figure of an earlier build that this one
    no longer has is deleted, so that the folder holds this build's figures only. The HTML loads
    plotly.js from its CDN, as MlflowClient.log_figure writes it, which keeps each file small.
    Written where figures_home says, through the artifact store MLflow would pick for the run."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository  # MLflow: slow to import

    home = figures_home(client.get_run(run_id).info.artifact_uri, artifact_root)
    repo = get_artifact_repository(home, tracking_uri=client.tracking_uri)
    with tempfile.TemporaryDirectory() as tmp:
        for name, fig in figures.items():
            fig.write_html(Path(tmp) / f"{name}.html", include_plotlyjs="cdn", auto_open=False)
        repo.log_artifacts(tmp, FIGURES)
    keep = {f"{FIGURES}/{name}.html" for name in figures}
    for found in repo.list_artifacts(FIGURES):
        if found.path not in keep:
            repo.delete_artifacts(found.path)


def figures_home(uri: str, artifact_root: Path | None) -> str:
    """The run's artifact folder to write to: the recorded one, unless the store is a local one
    that has moved (copied from the GPU machine): MLflow records absolute paths, and where the
    recorded ``.../mlartifacts`` is not on this machine the same folder under this store's own
    ``artifact_root`` is taken, where `wb results` and the dashboard read a moved store's
    artifacts (foxwb.workbench.analysis.runs.artifact_uri), rather than make the old path here."""
    if artifact_root is None or not uri.startswith("file:"):
        return uri
    path = Path(unquote(urlparse(uri).path))
    if "mlartifacts" not in path.parts:
        return uri
    cut = len(path.parts) - path.parts[::-1].index("mlartifacts")
    if Path(*path.parts[:cut]).exists():
        return uri
    return Path(artifact_root).joinpath(*path.parts[cut:]).resolve().as_uri()
