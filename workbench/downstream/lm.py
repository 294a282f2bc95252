"""A trained trial as an lm-evaluation-harness model: ``lm_eval.api.model.LM`` over the workbench's
own LM and the trial's tokenizer (byte, BPE or a tokenizer.json).

Our models have no beginning-of-text token: a document's first token is never scored, in training
as here. So a request with an empty context scores its continuation from the second token on (the
first is its context), and ``loglikelihood_rolling`` of a text is the sum of the log-probabilities
of its every token but the first: minus the document loss the trial's test split reports for that
text, through the same sliding windows (foxwb.workbench.data.held_out.windows, the trial's
``eval.test_stride``).

A context longer than the model's training context is cut from the left: each scored token is
predicted from at most ``context`` tokens before it.
"""
from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import torch
import torch.nn.functional as F
from lm_eval.api.model import LM

from foxwb.workbench.data.batch import IGNORE
from foxwb.workbench.data.held_out import stride_tokens, windows

DEFAULT_MAX_GEN_TOKENS = 256


def scored_windows(tokens: np.ndarray, first: int, context: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(input, targets) rows that score ``tokens[first:]`` once each, every row at most ``context``
    inputs long, the last one ending at the end: the context is cut from the left. Targets not
    scored are IGNORE. ``first`` >= 1 (the first token has nothing before it)."""
    out, end = [], len(tokens)  # this row scores targets [max(first, start + 1), end)
    while end > first:
        start = max(0, end - 1 - context)
        x, y = tokens[start : end - 1], tokens[start + 1 : end].copy()
        y[: max(first, start + 1) - (start + 1)] = IGNORE
        out.append((x, y))
        end = start + 1
    return out


class WorkbenchLM(LM):
    """``model``: tokens (B, T) -> logits (B, T, V) (foxwb.workbench.model.LM); ``tokenizer`` with
    ``encode(str) -> int array`` and ``decode(ids) -> str``; ``context``: the training context in
    tokens; ``stride``: the share of the context between rolling windows (eval.test_stride)."""

    def __init__(self, model, tokenizer, context: int, device: torch.device, autocast=nullcontext,
                 batch_size: int = 16, stride: float = 0.5):
        super().__init__()
        self.model, self.tokenizer, self.context = model.eval(), tokenizer, context
        self._device = device  # lm-eval's LM reads it through its ``device`` property
        self.autocast, self.batch_size, self.stride = autocast, batch_size, stride

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self.tokenizer.encode(text), dtype=np.int64)

    def encode_pair(self, context: str, continuation: str) -> tuple[np.ndarray, np.ndarray]:
        """The tokens of ``context`` and of ``continuation`` after it. The two are encoded as one text
        where its tokens start with the context's (BPE merges across the seam otherwise), else apart."""
        ctx, whole = self.encode(context), self.encode(context + continuation)
        if len(whole) > len(ctx) and np.array_equal(whole[: len(ctx)], ctx):
            return ctx, whole[len(ctx) :]
        return ctx, self.encode(continuation)

    @torch.no_grad()
    def score_rows(self, rows: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[float, bool]]:
        """Per row: (summed log-probability of its scored targets in nats, whether each is the argmax)."""
        out: list[tuple[float, bool] | None] = [None] * len(rows)
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i][0]))  # similar lengths share a batch
        for b in range(0, len(order), self.batch_size):
            chunk = order[b : b + self.batch_size]
            width = max(len(rows[i][0]) for i in chunk)
            xs = np.zeros((len(chunk), width), dtype=np.int64)
            ys = np.full((len(chunk), width), IGNORE, dtype=np.int64)
            for r, i in enumerate(chunk):  # padded on the right: a causal model's earlier positions never see it
                xs[r, : len(rows[i][0])], ys[r, : len(rows[i][1])] = rows[i]
            x, y = torch.from_numpy(xs).to(self.device), torch.from_numpy(ys).to(self.device)
            with self.autocast():
                logits = self.model(x)  # (B, T, V)
            logp = F.log_softmax(logits.float(), dim=-1)
            valid = y != IGNORE
            picked = logp.gather(-1, y.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, T)
            greedy = (logp.argmax(-1) == y) | ~valid
            sums = (picked.double() * valid).sum(1).cpu().tolist()
            for r, i in enumerate(chunk):
                out[i] = (sums[r], bool(greedy[r].all()))
        return out

    def _summed(self, per_request: list[list[tuple[np.ndarray, np.ndarray]]]) -> list[tuple[float, bool]]:
        """Each request's rows scored in one pass over all rows, summed back per request."""
        flat = [row for rows in per_request for row in rows]
        scores, out, k = self.score_rows(flat), [], 0
        for rows in per_request:
            mine = scores[k : k + len(rows)]
            k += len(rows)
            out.append((float(sum(s for s, _ in mine)), all(g for _, g in mine)))
        return out

    def loglikelihood(self, requests) -> list[tuple[float, bool]]:
        rows = []
        for request in requests:
            ctx, cont = self.encode_pair(*request.args)
            tokens = np.concatenate([ctx, cont])
            rows.append(scored_windows(tokens, max(len(ctx), 1), self.context))
        return self._summed(rows)

    def loglikelihood_rolling(self, requests) -> list[float]:
        step = stride_tokens(self.context, self.stride)
        rows = [windows(self.encode(request.args[0]), self.context, step) for request in requests]
        return [total for total, _ in self._summed(rows)]

    @torch.no_grad()
    def generate_until(self, requests) -> list[str]:
        return [self.greedy(context, dict(kwargs or {})) for context, kwargs in (r.args for r in requests)]

    def greedy(self, context: str, kwargs: dict) -> str:
        """Greedy decoding from ``context`` until a stop string of ``kwargs['until']`` (cut off) or
        ``max_gen_toks`` tokens (default 256). Sampling options are ignored: decoding is greedy."""
        until = kwargs.get("until") or []
        until = [until] if isinstance(until, str) else list(until)
        limit = int(kwargs.get("max_gen_toks", DEFAULT_MAX_GEN_TOKENS))
        ids, made = list(self.encode(context)), []
        if not ids:  # no beginning-of-text token: nothing to predict the first token from
            return ""
        text = ""
        for _ in range(limit):
            x = torch.tensor([(ids + made)[-self.context :]], device=self.device)
            with self.autocast():
                logits = self.model(x)  # (1, T, V)
            made.append(int(logits[0, -1].float().argmax()))
            text = self.tokenizer.decode(made)
            cut = min((text.find(s) for s in until if s and s in text), default=-1)
            if cut >= 0:
                return text[:cut]
        return text
