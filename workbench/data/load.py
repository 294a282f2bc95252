"""A trial's data from its spec: the one entry point of the data stage."""
from __future__ import annotations

from foxwb.workbench.data.corpus import MQARTask, load_corpus, load_tokens
from foxwb.workbench.data.documents import load_documents
from foxwb.workbench.data.english.read import load_english
from foxwb.workbench.data.held_out import too_small
from foxwb.workbench.data.longcrawl import load_longcrawl
from foxwb.workbench.spec.data import LongCrawl64Data
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.trial import MQARData, TokenData


def load_data(spec, vocab_size: int, seed: int):
    """The trial's data: DocumentData or MQARTask."""
    if spec.kind in ("hf_dataset", "table", "shards"):
        return load_documents(spec, vocab_size)
    if spec.kind == "english":
        return load_english(spec)
    if isinstance(spec, LongCrawl64Data):
        return load_longcrawl(spec, vocab_size)
    if isinstance(spec, MQARData):
        return MQARTask(spec, seed)
    if isinstance(spec, TokenData):
        return load_tokens(spec, vocab_size)
    return load_corpus(spec)


def check_test_split(data, trial) -> None:
    """Refuse a trial (SpecError) whose test split holds fewer scored tokens than its
    ``eval.min_test_tokens``, before it trains. MQAR's test set is ``n_val`` sequences drawn
    afresh, not documents sampled from a corpus: not checked."""
    if isinstance(data, MQARTask):
        return
    refusal = too_small(data.test_set(trial.eval.test_tokens), trial.eval.min_test_tokens, trial.data)
    if refusal:
        raise SpecError(refusal)
