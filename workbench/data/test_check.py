"""A study's test sets before it runs (docs/trials-and-data.md, "Three splits"): for each data source of its
trials, the test set's size against ``eval.min_test_tokens``, and whether the cells share one test
set; ``wb run`` refuses a study whose test split is too small, and its dry run says so.

Loading a source to count is cheap for the built-in corpus, text read by bytes or a tokenizer file,
and token files; a BPE (trained on the training split first), a table or a dataset (tokenized into
the token cache) and shards are counted when their first trial starts, and the dry run says so.
"""
from __future__ import annotations

from dataclasses import dataclass

from foxwb.workbench.data.held_out import too_small
from foxwb.workbench.data.load import load_data
from foxwb.workbench.spec.errors import SpecError


@dataclass(frozen=True)
class TestCheck:
    source: str  # the data spec's canonical JSON, without its context
    rows: tuple[str, ...]  # the trials' rows that read it
    scored: int | None  # None: not counted before the run
    documents: int | None
    digest: str | None
    refusal: str | None
    note: str = ""


def _cheap(spec) -> str:
    """'' where counting the test split before the run is cheap, else why it waits."""
    if spec.kind == "mqar":
        return "MQAR: the test set is data.n_val sequences drawn afresh, no minimum"
    if spec.kind in ("builtin", "text", "english") and spec.tokenizer == "bpe":
        return "counted when its first trial starts (a BPE is trained on the training split first)"
    if spec.kind in ("hf_dataset", "table", "shards"):
        return "counted when its first trial starts (the documents are tokenized or indexed then)"
    return ""


def check_trials(trials) -> list[TestCheck]:
    """One TestCheck per distinct data source and test-set request of ``trials`` (expanded Trials)."""
    groups: dict[tuple, list] = {}
    for t in trials:
        data = t.spec.data.model_dump(mode="json")
        data.pop("context", None)
        key = (str(sorted(data.items())), t.spec.eval.test_tokens, t.spec.eval.min_test_tokens)
        groups.setdefault(key, []).append(t)
    out = []
    for (source, asked, minimum), group in groups.items():
        rows = tuple(dict.fromkeys(t.row for t in group))
        first = group[0].spec
        why = _cheap(first.data)
        if why:
            out.append(TestCheck(source, rows, None, None, None, None, why))
            continue
        try:
            data = load_data(first.data, first.model.vocab_size, group[0].seed)
        except (SpecError, OSError) as e:  # its trials fail with this reason, each recorded; the others run
            out.append(TestCheck(source, rows, None, None, None, None, f"not counted: its data does not load here ({e})"))
            continue
        test = data.test_set(asked)
        out.append(TestCheck(source, rows, test.scored, len(test.docs), test.digest, too_small(test, minimum, first.data)))
    return out


def lines(checks: list[TestCheck]) -> list[str]:
    """The dry run's lines: the test set of each source, and a refusal where one is too small."""
    out = []
    for c in checks:
        rows = ", ".join(c.rows[:3]) + (f" and {len(c.rows) - 3} more" if len(c.rows) > 3 else "")
        which = "every row" if len(checks) == 1 else rows
        if c.scored is None:
            out.append(f"test set of {which}: {c.note}")
        elif c.refusal:
            out.append(f"REFUSED: {c.refusal} (rows: {rows})")
        else:
            out.append(f"test set of {which}: {c.scored:,} scored tokens in {c.documents} document{'s' if c.documents != 1 else ''} "
                       f"(digest {c.digest}), the same for every cell that reads it")
    if len({c.digest for c in checks if c.digest}) > 1:
        out.append("note: the rows read different test sets (their data differ beyond the context): a comparison "
                   "between them is also one between test sets")
    return out


def refuse(checks: list[TestCheck]) -> None:
    """Raise the first refusal (SpecError): `wb run` stops before it starts a trial."""
    for c in checks:
        if c.refusal:
            raise SpecError(c.refusal)
