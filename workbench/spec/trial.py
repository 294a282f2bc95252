"""Specs: the validated, frozen, hashable description of what a trial builds and runs.

Every spec is pydantic v2 with ``extra="forbid"``; it round-trips through JSON and YAML, and
``spec_hash()`` (a hash of canonical JSON) is its identity. A field that changes how a trial
runs but not what it computes (``TrainSpec.cuda_graphs``: the same kernels, replayed;
``TrainSpec.workers`` and ``parallel``: the same global batches, on more processes) is listed
in its class's ``_execution_only`` and left out of the identity, so switching it finds the same
finished trials and checkpoints. A field added after trials were run with the behaviour of its
default is listed in ``_new_fields`` and left out of the identity while it holds that default,
so those trials keep their hashes.
"""
from __future__ import annotations

from functools import partial
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SerializeAsAny,
    Strict,
    ValidationInfo,
    field_validator,
    model_validator,
)

from foxwb import components
from foxwb.components.registry import ComponentSpec
from foxwb.kernels.attention.pruning import check_tolerance
from foxwb.workbench.spec.data import DatasetData, EnglishData, LongCrawl64Data, ShardData, TableData, Tokenizer, tokenizer_vocab
from foxwb.workbench.spec.presets import apply_preset
from foxwb.workbench.spec.base import Spec
from foxwb.workbench.spec.errors import check_file_kind, read_located, validate
from foxwb.workbench.spec.overrides import Override, apply as apply_overrides


def Slot(slot: str):
    """Field type of one component slot: accepts a bare kind or a mapping with ``kind``."""
    return Annotated[SerializeAsAny[ComponentSpec], BeforeValidator(partial(components.parse, slot))]


class AttentionSpec(Spec):
    """One field per slot, in the order the slots act (docs/fox-notes.md, "One attention layer")."""

    kv_shift: Slot("kv_shift") = "none"
    qk_norm: Slot("qk_norm") = "none"
    rope: Slot("rope") = "none"
    forget_gate: Slot("forget_gate") = "none"
    output_norm: Slot("output_norm") = "none"
    output_gate: Slot("output_gate") = "none"
    # Adaptive computation pruning (kernels/attention/pruning.py; docs/fox-notes.md, "Adaptive computation pruning"): ln of the attention
    # mass a row may lose when the Triton kernel skips tiles whose decay makes them negligible;
    # -10 is the paper's recommendation, None computes every tile. It changes the numbers (within
    # that bound), so it is part of the identity once set.
    log_pruning_tolerance: float | None = None
    # A sliding window (kernels.forgetting_attention's ``window``): query i sees only the keys
    # i - W < j <= i; None is full causal attention. Without a gate it is a sliding-window
    # Transformer, the recency-only control for FoX. Part of the identity once set.
    window: Annotated[PositiveInt, Strict()] | None = None
    _new_fields: ClassVar[frozenset[str]] = frozenset({"log_pruning_tolerance", "window"})

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    def slots(self) -> dict[str, ComponentSpec]:
        """The component slots (every field but the options like log_pruning_tolerance and window), in order."""
        return {name: value for name in type(self).model_fields
                if isinstance(value := getattr(self, name), ComponentSpec)}

    @field_validator("log_pruning_tolerance")
    @classmethod
    def _pruning_needs_a_gate(cls, log_eps: float | None, info: ValidationInfo) -> float | None:
        if log_eps is None:
            return None
        check_tolerance(log_eps)
        gate = info.data.get("forget_gate")
        if gate is not None and gate.kind == "none":
            raise ValueError("log_pruning_tolerance needs a forget gate (forget_gate: none has no decay to prune by)")
        return log_eps

    @field_validator("window")
    @classmethod
    def _window_without_pruning(cls, window: int | None, info: ValidationInfo) -> int | None:
        log_eps = info.data.get("log_pruning_tolerance")
        if window is not None and log_eps is not None:
            raise ValueError(f"window={window} cannot be combined with log_pruning_tolerance={log_eps} "
                             "(the kernels implement one or the other); set one of them")
        return window

    @field_validator("output_gate")
    @classmethod
    def _silu_without_norm(cls, gate: ComponentSpec, info: ValidationInfo) -> ComponentSpec:
        norm = info.data.get("output_norm")
        if gate.kind == "silu" and norm is not None and norm.kind != "none":
            raise ValueError(
                f"output_gate 'silu' cannot be combined with output_norm {norm.kind!r} "
                "(the norm is fused with a sigmoid gate); use 'sigmoid' or set output_norm: none"
            )
        return gate


class ModelSpec(Spec):
    """A decoder-only LM: embedding, n_layers pre-norm blocks, final norm, LM head.

    ``preset`` (one of foxwb.workbench.spec.presets.PRESETS) fills in the architecture; any field given
    explicitly overrides it (per slot for ``attention``). Defaults are the paper's 125M size.
    """

    vocab_size: PositiveInt = 50257
    d_model: PositiveInt = 768
    n_layers: PositiveInt = 12
    n_heads: PositiveInt = 12
    attention: AttentionSpec = AttentionSpec()
    mlp: Slot("mlp") = "swiglu"
    norm: Slot("norm") = "rmsnorm"
    init_std: PositiveFloat = 0.02
    tie_embeddings: bool = False

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return apply_preset(data) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _heads_divide(self):
        # After the fields, and only when every field is valid: a misspelt `n_head` is reported as
        # the unknown key it is, not also as a clash of the default n_heads=12 with d_model.
        if self.d_model % self.n_heads:
            given = "" if "n_heads" in self.model_fields_set else " (the default)"
            raise ValueError(f"n_heads={self.n_heads}{given} does not divide d_model={self.d_model}; "
                             f"pick a divisor of {self.d_model}")
        return self

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def dims(self) -> components.BlockDims:
        return components.BlockDims(self.d_model, self.n_heads)

    def components(self) -> list[components.ComponentSpec]:
        """Every slot's options: the attention slots in order, then the block's norm and MLP."""
        return [*self.attention.slots().values(), self.norm, self.mlp]


class CorpusData(Spec):
    """Text documents: ``builtin`` (the Python standard library's own source files, present on
    every Python installation: no download) or ``text`` (the user's files and folders).
    Tokenized by bytes (vocab 256), by a BPE trained locally on the training split, or by a
    Hugging Face tokenizer.json from disk (``foxwb.workbench.spec.data.HFTokenizerSpec``).
    ``sources`` (builtin only): ``stdlib``, or ``stdlib+packages`` to add the ``.py`` files of the
    running Python's installed packages, for a machine whose standard library is small (a distro
    Python without its test suite: 10M tokens). Which files the corpus holds depends on the Python
    that runs the trial; a result records its size (``train_tokens_available``, ``data_epochs``)."""

    _new_fields: ClassVar[frozenset[str]] = frozenset({"sources"})
    kind: Literal["builtin", "text"] = "builtin"
    sources: Literal["stdlib", "stdlib+packages"] = "stdlib"
    paths: list[str] = []
    suffixes: list[str] = [".py", ".txt", ".md"]
    context: PositiveInt = 256
    tokenizer: Tokenizer = "byte"
    bpe_vocab_size: PositiveInt = 4096
    val_fraction: Annotated[float, Field(gt=0, lt=1)] = 0.05
    max_bytes: PositiveInt | None = 20_000_000

    @model_validator(mode="after")
    def _paths(self):
        if self.kind == "text" and not self.paths:
            raise ValueError("paths: a 'text' corpus needs at least one file or folder")
        if self.kind == "builtin" and self.paths:
            raise ValueError("paths: the 'builtin' corpus takes no paths (use kind: text for your own files)")
        if self.kind == "text" and self.sources != "stdlib":
            raise ValueError("sources: only the 'builtin' corpus takes sources (stdlib or stdlib+packages)")
        return self


class TokenData(Spec):
    """Pre-tokenized ids, memory-mapped: ``.npy`` or raw ``.bin`` of ``dtype``. Documents are split
    at ``eot_token`` when given, else the file is one long document."""

    kind: Literal["tokens"] = "tokens"
    train: str
    val: str
    dtype: Literal["uint16", "uint32"] = "uint16"
    eot_token: NonNegativeInt | None = None
    context: PositiveInt = 1024


class MQARData(Spec):
    """Multi-query associative recall (Zoology): ``n_pairs`` key-value pairs, then ``n_queries``
    keys asked again; the loss and the accuracy count only the answers."""

    kind: Literal["mqar"] = "mqar"
    n_pairs: PositiveInt = 8
    n_queries: PositiveInt = 8
    n_keys: PositiveInt = 64
    n_values: PositiveInt = 64
    n_train: PositiveInt = 20_000
    n_val: PositiveInt = 500

    @property
    def context(self) -> int:
        return 2 * self.n_pairs + 2 * self.n_queries

    @property
    def vocab_needed(self) -> int:
        return self.n_keys + self.n_values

    @model_validator(mode="after")
    def _enough_keys(self):
        if self.n_pairs > self.n_keys:
            raise ValueError(f"n_pairs={self.n_pairs} needs at least as many distinct keys (n_keys={self.n_keys})")
        if self.n_queries > self.n_pairs:
            raise ValueError(f"n_queries={self.n_queries} cannot exceed n_pairs={self.n_pairs}")
        return self


DataSpec = Annotated[CorpusData | TokenData | MQARData | DatasetData | TableData | ShardData | LongCrawl64Data | EnglishData,
                    Field(discriminator="kind")]


def whole_steps(tokens: int, per_step: int) -> int:
    """``tokens`` rounded up to whole steps of ``per_step`` tokens: what a training of ``tokens``
    runs through (its last step is a whole one)."""
    return -(-tokens // per_step) * per_step


class TrainSpec(Spec):
    """Token counts are in tokens; one step = batch_size * grad_accum sequences of the context."""

    tokens: PositiveInt = 1_000_000
    batch_size: PositiveInt = 16
    grad_accum: PositiveInt = 1
    lr: PositiveFloat = 2e-3
    min_lr_ratio: Annotated[float, Field(ge=0, le=1)] = 0.0
    warmup_tokens: NonNegativeInt = 0
    weight_decay: NonNegativeFloat = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: PositiveFloat | None = 1.0
    eval_every_tokens: PositiveInt | None = None
    eval_batches: PositiveInt = 4
    checkpoint_every_tokens: PositiveInt | None = None
    compile: bool = False
    # With compile on a CUDA device: the compiled forward and backward replay as CUDA graphs
    # (torch.compile's "reduce-overhead" mode), so the GPU no longer waits for Python to launch
    # each kernel. Same kernels, same results; off saves the graphs' memory pool.
    cuda_graphs: bool = True
    device: Literal["auto", "cpu", "cuda"] = "auto"
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    cpu_threads: PositiveInt | None = None
    # Processes (one GPU each on a GPU machine) that train the trial together, on Ray Train
    # (workbench/run/ray_train.py): each takes its share of every step's global batch
    # (workbench/train/step_share.py), so any count trains on the same tokens. ``parallel``: how they share
    # the model: ``ddp`` replicates it, ``fsdp`` (FSDP2) shards parameters, gradients and
    # optimizer state. Both are how the trial runs, not what it computes: not in the identity.
    workers: PositiveInt = 1
    parallel: Literal["ddp", "fsdp"] = "ddp"
    # Record each step's gradient norm per part of the model (workbench/train/grad_parts.py) in the
    # history: what a spike comes from. Changes no result: not in the identity.
    grad_norm_parts: bool = False
    # Keep the final weights in the trial folder (its checkpoint at the last step, the model's state
    # without the optimizer's where no periodic checkpoint fell there): what `wb eval` and `wb export`
    # read. What is kept, not what is computed: not in the identity.
    keep_weights: bool = True

    _execution_only: ClassVar[frozenset[str]] = frozenset({"cuda_graphs", "workers", "parallel", "grad_norm_parts",
                                                           "keep_weights"})

    def step_tokens(self, context: int) -> int:
        """The tokens one optimizer step trains on at this context."""
        return self.batch_size * self.grad_accum * context

    def trained_tokens(self, context: int) -> int:
        """The tokens training runs through at this context: ``tokens`` rounded up to whole steps."""
        return whole_steps(self.tokens, self.step_tokens(context))

    def warmup_note(self, context: int) -> str | None:
        """Why the schedule would not do what the file seems to ask: a warmup as long as the
        training itself, so that the learning rate never reaches ``lr``; else None."""
        trained = self.trained_tokens(context)
        if self.warmup_tokens < trained:
            return None
        return (f"train.warmup_tokens={self.warmup_tokens:,} is at least the {trained:,} tokens it trains: its learning "
                f"rate never reaches train.lr={self.lr:g}")

    def total_steps(self, context: int) -> int:
        """The optimizer steps training takes at this context (the last one whole)."""
        return self.trained_tokens(context) // self.step_tokens(context)

    @model_validator(mode="after")
    def _parts_need_whole_gradients(self):
        if self.grad_norm_parts and self.parallel == "fsdp":
            raise ValueError("train.grad_norm_parts needs whole gradients, which FSDP shards: "
                             "allowed with train.parallel=ddp")
        return self


class NeedleEval(Spec):
    """Needle in a haystack: a 5-digit code hidden at each depth of validation text of each length;
    scored by exact match of the greedy continuation."""

    lengths: list[PositiveInt] = [256, 512]
    depths: list[Annotated[float, Field(ge=0, le=1)]] = [0.0, 0.25, 0.5, 0.75, 1.0]
    trials: PositiveInt = 4


# Why a run validated on fewer held-out sequences than ``sequences`` asks, and the fix: `wb train`
# and the study table's notes say it.
FEWER_SEQUENCES = ("the select split (every other held-out document) has too few documents of context + 1 tokens; "
                   "raise data.val_fraction or data.max_bytes, or lower eval.sequences")


# The test set (docs/trials-and-data.md, "Three splits"): its size in scored tokens, the least a trial accepts,
# and the sliding window's stride as a share of the context.
DEFAULT_TEST_TOKENS = 131_072
DEFAULT_MIN_TEST_TOKENS = 32_768


class EvalSpec(Spec):
    """What a trial is scored on after training (docs/trials-and-data.md, "Three splits").

    - ``sequences``: select-split sequences of context + 1 tokens for ``val_loss``, the number every
      choice reads; and test-split sequences per length for L(i) (``length_multiples``: multiples
      of the training context, 1 = in-context, 2 and 4 = length extrapolation).
    - ``test_tokens``: the test set, whole test documents in order until this many scored tokens,
      read through a sliding window ``test_stride`` x context apart; ``test_loss`` is its mean.
    - ``min_test_tokens``: a trial whose test split holds fewer refuses to start."""

    sequences: PositiveInt = 16
    batch_size: PositiveInt = 4
    length_multiples: list[PositiveInt] = [1, 2]
    needle: NeedleEval | None = None
    test_tokens: PositiveInt = DEFAULT_TEST_TOKENS
    min_test_tokens: PositiveInt = DEFAULT_MIN_TEST_TOKENS
    test_stride: Annotated[float, Field(gt=0, le=1)] = 0.5

    _new_fields: ClassVar[frozenset[str]] = frozenset({"test_tokens", "min_test_tokens", "test_stride"})

    @model_validator(mode="after")
    def _minimum_below_size(self):
        if self.min_test_tokens > self.test_tokens:
            raise ValueError(f"min_test_tokens={self.min_test_tokens} is above test_tokens={self.test_tokens}: "
                             "the test set would always be refused; lower min_test_tokens or raise test_tokens")
        return self


def _distinct(seeds: list[int]) -> list[int]:
    if not seeds:
        raise ValueError("no seeds listed: list one or more")
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ValueError(f"seed {twice[0]} is listed twice; each seed is one run of each row")
    return seeds


_MOST_SEEDS = 10_000  # a range past this is a typo, not a study (each seed trains every row)
_SEED_FORMS = "a list such as [0, 1, 2], or a string of seeds and ranges such as '0-250' or '0-23, 30' (both ends included)"


def _seed_ranges(seeds: Any) -> Any:
    """``'0-250'`` is seeds 0 to 250; ``'0-23, 30'`` adds seed 30. A list passes through to its
    own checks; a lone number is refused (seed 3, or 3 seeds? the file must say)."""
    if isinstance(seeds, list):
        if any(isinstance(s, str) for s in seeds):
            raise ValueError(f"a range is a string of its own ('0-2, 5'), not an item of a list; write {_SEED_FORMS}")
        return seeds
    if isinstance(seeds, int) and not isinstance(seeds, bool) and seeds >= 0:
        raise ValueError(f"{seeds} is one number, not a list of seeds: write [{seeds}] for seed {seeds}"
                         + (f", or '0-{seeds - 1}' for {seeds} seeds" if seeds > 1 else ""))
    if not isinstance(seeds, str):
        raise ValueError(f"{seeds!r} is not a list of seeds; write {_SEED_FORMS}")
    out: list[int] = []
    digits = lambda s: s.strip().isascii() and s.strip().isdecimal()
    for item in seeds.split(","):
        first, dash, last = item.strip().partition("-")
        if not digits(first) or (dash and not digits(last)):
            raise ValueError(f"{item.strip()!r} is not a seed or a range of seeds; write {_SEED_FORMS}")
        lo, hi = int(first), int(last) if dash else int(first)
        if hi < lo:
            raise ValueError(f"the range {item.strip()!r} runs backwards; write it as '{hi}-{lo}'")
        if hi - lo >= _MOST_SEEDS - len(out):
            raise ValueError(f"{seeds!r} names more than {_MOST_SEEDS:,} seeds")
        out.extend(range(lo, hi + 1))
    return out


# A seed seeds torch's generator (a signed 64-bit integer); true is not 1 here.
Seed = Annotated[int, Strict(), Field(ge=0, lt=2**63)]
Seeds = Annotated[list[Seed], BeforeValidator(_seed_ranges), AfterValidator(_distinct)]


class TrialSpec(Spec):
    """One cell of a study: one model, one dataset, one seed."""

    model: ModelSpec = ModelSpec()
    data: DataSpec = CorpusData()
    train: TrainSpec = TrainSpec()
    eval: EvalSpec = EvalSpec()
    seed: NonNegativeInt = 0

    @model_validator(mode="after")
    def _vocab_fits(self):
        need = data_vocab_size(self.data)
        if need is not None and need > self.model.vocab_size:
            raise ValueError(
                f"model.vocab_size={self.model.vocab_size} is smaller than the data's vocabulary "
                f"({need} for data.kind={self.data.kind!r}{_tokenizer_note(self.data)}); set model.vocab_size to at least {need}"
            )
        return self


def _tokenizer_note(data) -> str:
    tok = getattr(data, "tokenizer", None)
    return f" with the tokenizer {tok.path}" if getattr(tok, "path", None) else ""


def data_vocab_size(data) -> int | None:
    """Vocabulary the data needs, where the spec alone tells (token ids are checked on load)."""
    if isinstance(data, (MQARData, LongCrawl64Data)):
        return data.vocab_needed
    if isinstance(data, (CorpusData, EnglishData)):
        return data.bpe_vocab_size if data.tokenizer == "bpe" else tokenizer_vocab(data.tokenizer)
    if isinstance(data, (DatasetData, TableData)):
        return tokenizer_vocab(data.effective_tokenizer())
    if isinstance(data, ShardData):
        return tokenizer_vocab(data.tokenizer)
    return None


def load_trial(path: str, overrides: list[Override] | None = None) -> TrialSpec:
    """The trial file at ``path`` (`wb train`'s), read and validated, with the command line's
    ``--set`` edits over it (overrides); errors name the file, the line and column (or the
    ``--set``), and the field."""
    data, positions = read_located(path)
    check_file_kind(data, path, "trial")
    data, positions = apply_overrides(data, positions, overrides)
    return validate(TrialSpec, data, path, positions)
