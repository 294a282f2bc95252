"""Evaluation of a trained model: the select split's loss (what choices read), the test set's
(what the table reports: foxwb.workbench.data.held_out), each also in bits per byte, per-position
loss L(i) at the training context and beyond it, P(l), needle-in-a-haystack accuracy, MQAR accuracy."""
from __future__ import annotations

import math
from contextlib import nullcontext

import numpy as np
import torch
import torch.nn.functional as F

from foxwb.kernels.attention.pruning import kept_pairs
from foxwb.workbench.data.corpus import IGNORE, DocumentData, MQARTask
from foxwb.workbench.data.held_out import SELECT, TEST, test_batches
from foxwb.workbench.data.tokenizer import UNKNOWN_TEXT, byte_table
from foxwb.workbench.spec.trial import EvalSpec


def unigram_entropy(tokens) -> float:
    """Entropy of the validation split's token frequencies, nats/token: the loss of the best model
    that ignores context, a floor any useful model must beat. ``tokens``: an array, or an iterable
    of arrays (a split larger than memory, counted a piece at a time)."""
    pieces = [tokens] if isinstance(tokens, np.ndarray) else tokens
    counts = np.zeros(0, dtype=np.int64)
    for piece in pieces:
        found = np.bincount(np.asarray(piece, dtype=np.int64))
        if len(found) > len(counts):
            found[: len(counts)] += counts
            counts = found
        else:
            counts[: len(found)] += found
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def bits_per_byte(nats: float, n_bytes: int | None) -> float | None:
    """Summed loss in nats over the bytes of text its targets stand for, in bits: a tokenizer's
    share of the work taken out, so variants of different tokenizers compare."""
    return nats / (math.log(2) * n_bytes) if n_bytes else None


def target_bytes(table: torch.Tensor | None, targets) -> int | None:
    """UTF-8 bytes of text the scored targets stand for (``table``: bytes per token id, from
    foxwb.workbench.data.tokenizer.byte_table), over ``targets``, (B, T) tensors with IGNORE
    where not scored; None without a table or where a target's id has no text."""
    if table is None:
        return None
    total = 0
    for y in targets:
        ids = y[y != IGNORE]
        if len(ids) and int(ids.max()) >= len(table):
            return None
        scored = table[ids]
        if (scored < 0).any():
            return None
        total += int(scored.sum())
    return total


def byte_lookup(data) -> tuple[torch.Tensor | None, str | None]:
    """``data``'s bytes per token id as a tensor, or None and why (MQAR: no text at all)."""
    if isinstance(data, MQARTask):
        return None, "MQAR sequences stand for no text"
    table, why = byte_table(data.tokenizer, data.vocab_size, data.select_docs)
    return (None if table is None else torch.from_numpy(table)), why


@torch.no_grad()
def acp_kept_fraction(model, batches, device, autocast) -> dict:
    """How much attention adaptive computation pruning leaves (kernels/attention/pruning.py), per
    layer and head, on the first validation sequence: the share of causal pairs whose decay keeps
    them above the threshold of the model's ln eps (-10, the paper's, where pruning is off).
    Fast-forgetting heads show as small shares. Empty for a model without a forget gate."""
    blocks = [b.attn for b in getattr(model, "blocks", []) if getattr(b.attn, "forget_gate", None) is not None]
    if not blocks or not batches:
        return {}
    log_eps = blocks[0].log_pruning_tolerance or -10.0
    found: list = []

    def probe(attn, args):
        # Each layer's q, k and log f from the input the layer is about to see.
        q, k, _, log_f, _ = attn.attention_inputs(args[0])
        found.append(kept_pairs(q, k, log_f, attn.head_dim**-0.5, log_eps))

    hooks = [attn.register_forward_pre_hook(probe) for attn in blocks]
    try:
        with autocast():
            model(batches[0].x[:1].to(device))
    finally:
        for hook in hooks:
            hook.remove()
    per_head = [f[0].tolist() for f in found]  # one row of heads per layer
    return {"acp_log_eps": log_eps,
            "acp_kept_fraction": float(sum(sum(r) for r in per_head) / sum(len(r) for r in per_head)),
            "acp_kept_fraction_per_head": per_head}


def token_losses(model, batch, device, autocast) -> tuple[torch.Tensor, torch.Tensor]:
    """Loss per target (fp64, 0 where IGNORE) and 1 where a target counts, both (B, T)."""
    x, y = batch.x.to(device), batch.y.to(device)
    with autocast():
        logits = model(x)
    loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=IGNORE, reduction="none")
    valid = (y != IGNORE).double()
    return loss.view(y.shape).double() * valid, valid


@torch.no_grad()
def per_position_loss(model, batches, device, autocast) -> tuple[np.ndarray, np.ndarray]:
    """Summed loss and count per position over the batches (fp64); IGNORE targets count 0."""
    total = count = None
    for batch in batches:
        loss, valid = token_losses(model, batch, device, autocast)
        s, c = loss.sum(0).cpu().numpy(), valid.sum(0).cpu().numpy()
        total, count = (s, c) if total is None else (total + s, count + c)
    return total, count


@torch.no_grad()
def test_scores(model, data, spec: EvalSpec, context: int, device, autocast, table: torch.Tensor | None = None) -> dict:
    """The test set's loss (docs/trials-and-data.md, "Three splits"), overall and per document: the number
    the table reports; with ``table`` (bytes per token id) also in bits per byte. MQAR: its test
    sequences, each one a document."""
    if isinstance(data, MQARTask):
        n = data.spec.n_val
        rows = [(b, np.arange(i, i + len(b.x))) for i, b in zip(range(0, n, spec.batch_size),
                                                                 data.eval_batches(data.context, n, spec.batch_size, TEST))]
        n_docs, asked, available, stride, digest = n, None, None, None, None
    else:
        test = data.test_set(spec.test_tokens)
        rows = test_batches(test, context, spec.test_stride, spec.batch_size)
        n_docs, asked, available, stride, digest = len(test.docs), test.asked, test.available, spec.test_stride, test.digest
    sums, counts = np.zeros(n_docs), np.zeros(n_docs)
    for batch, docs in rows:
        loss, valid = token_losses(model, batch, device, autocast)
        np.add.at(sums, docs, loss.sum(1).cpu().numpy())
        np.add.at(counts, docs, valid.sum(1).cpu().numpy())
    if counts.sum() == 0:
        return {"test_tokens": 0, "test_documents": 0}
    loss = float(sums.sum() / counts.sum())
    n_bytes = target_bytes(table, (batch.y for batch, _ in rows))
    bpb = {} if n_bytes is None else {"test_bpb": bits_per_byte(float(sums.sum()), n_bytes), "test_bytes": n_bytes}
    return {**bpb, "test_loss": loss, "test_ppl": math.exp(loss), "test_tokens": int(counts.sum()),
            "test_documents": n_docs,
            "test_tokens_asked": asked, "test_tokens_available": available, "test_stride": stride, "test_digest": digest,
            "test_doc_loss": [float(v) for v in sums / np.maximum(counts, 1)], "test_doc_tokens": [int(c) for c in counts]}


def perplexity_at_lengths(loss_by_pos: np.ndarray) -> dict[str, float]:
    """P(l) = exp(mean of L(1..l)) at powers of two up to the evaluated length, and at it."""
    n = len(loss_by_pos)
    lengths = sorted({2**k for k in range(int(math.log2(n)) + 1)} | {n})
    cum = np.cumsum(loss_by_pos)
    return {str(l): float(math.exp(cum[l - 1] / l)) for l in lengths}


@torch.no_grad()
def needle_accuracy(model, data: DocumentData, spec, device, autocast) -> dict[str, float]:
    """Hide 'The secret code is NNNNN.' at each depth of held-out text cut to each length, ask
    'The secret code is' at the end, score the greedy continuation by exact match."""
    tok = data.tokenizer
    rng = np.random.default_rng(0)
    haystacks = [d for d in data.test_docs if len(d) > max(spec.lengths)] or list(data.test_docs)
    out = {}
    for length in spec.lengths:
        for depth in spec.depths:
            hits = 0
            for trial in range(spec.trials):
                code = f"{rng.integers(10000, 100000)}"
                needle, query = tok.encode(f" The secret code is {code}. "), tok.encode(" The secret code is ")
                answer = tok.encode(code)
                hay = haystacks[trial % len(haystacks)]
                room = max(0, length - len(needle) - len(query))
                cut = int(depth * room)
                prompt = np.concatenate([hay[:cut], needle, hay[cut:room], query])
                ids = torch.from_numpy(prompt.astype(np.int64))[None].to(device)
                for _ in range(len(answer)):
                    with autocast():
                        nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
                    ids = torch.cat([ids, nxt], 1)
                hits += int(np.array_equal(ids[0, len(prompt):].cpu().numpy(), answer))
            out[f"len{length}_depth{depth:g}"] = hits / spec.trials
    return out


def split_scores(model, data, spec: EvalSpec, context: int, device, autocast) -> dict:
    """``val_loss``/``val_ppl`` on the select split, the test set's scores, and both losses in bits
    per byte (``val_bpb``, ``test_bpb``), or ``bpb_note``: why they cannot be known."""
    batches = data.eval_batches(context, spec.sequences, spec.batch_size, SELECT)
    total, count = per_position_loss(model, batches, device, autocast)
    # Fewer than asked where the select split has too few documents this long.
    result = {"eval_sequences": sum(len(b.x) for b in batches), "eval_sequences_asked": spec.sequences,
              "val_loss": float(total.sum() / count.sum())}
    result["val_ppl"] = math.exp(result["val_loss"])
    table, why = byte_lookup(data)
    result.update(test_scores(model, data, spec, context, device, autocast, table))
    val_bytes = target_bytes(table, (b.y for b in batches))
    if val_bytes is not None and "test_bpb" in result:
        result["val_bpb"] = bits_per_byte(float(total.sum()), val_bytes)
    else:  # both or neither: one split's alone compares with nothing
        for key in ("test_bpb", "test_bytes"):
            result.pop(key, None)
        result["bpb_note"] = why or UNKNOWN_TEXT
    return result


def evaluate(model, data, spec: EvalSpec, context: int, device, autocast=nullcontext) -> dict:
    """After training: ``val_loss`` on the select split (what a choice reads), ``test_loss`` on the
    test set (what the table reports), both also in bits per byte; L(i), P(l) and needles on the
    test split; the share pruning keeps on the select split, as during training."""
    model.eval()
    result: dict = {"eval_lengths": {}, **split_scores(model, data, spec, context, device, autocast)}
    longest = None
    for multiple in sorted(set(spec.length_multiples) | {1}):
        length = multiple * context
        batches = data.eval_batches(length, spec.sequences, spec.batch_size, TEST)
        if not batches:
            result["eval_lengths"][str(length)] = "no test document is this long"
            continue
        total, count = per_position_loss(model, batches, device, autocast)
        result["eval_lengths"][str(length)] = sum(len(b.x) for b in batches)  # sequences
        if isinstance(data, MQARTask):
            result["mqar_accuracy"] = mqar_accuracy(model, batches, device, autocast)
        longest = (length, total / np.maximum(count, 1))
    if longest is not None:
        result["eval_length"] = longest[0]
        result["per_position_loss"] = [float(v) for v in longest[1]]
        result["ppl_at_length"] = perplexity_at_lengths(longest[1])
        # On the select split's first sequence, as at every validation during training: one curve.
        result.update(acp_kept_fraction(model, data.eval_batches(context, 1, 1, SELECT), device, autocast))
    if spec.needle is not None and isinstance(data, DocumentData) and data.tokenizer is not None:
        result["needle_accuracy"] = needle_accuracy(model, data, spec.needle, device, autocast)
    model.train()
    return result


@torch.no_grad()
def mqar_accuracy(model, batches, device, autocast) -> float:
    right = total = 0
    for batch in batches:
        x, y = batch.x.to(device), batch.y.to(device)
        with autocast():
            pred = model(x).argmax(-1)
        mask = y != IGNORE
        right += int((pred[mask] == y[mask]).sum())
        total += int(mask.sum())
    return right / max(total, 1)
