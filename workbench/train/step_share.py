"""Each worker's share of a training step, so that N workers train on what one worker would.

A step's global batch is a property of the spec: ``train.grad_accum`` micro-batches of
``train.batch_size`` sequences, micro-batch m drawn by ``data.train_batch(seed, step, m,
batch_size)``. Laid end to end they are ``G = batch_size * grad_accum`` rows; worker r of N takes
the contiguous block of rows ``[r G/N, (r + 1) G/N)``, in micro-batches of at most ``batch_size``
rows (the largest divisor of G/N that fits, so no worker holds more activations than one worker
did). One worker's block is the whole step in the spec's own micro-batches.

Every worker scales its micro-batch losses by 1 / (its micro-batches); averaging the gradients
over the workers (DDP's all-reduce, FSDP's reduce-scatter) then gives the gradient of the mean
loss over the G rows, which is one worker's step whenever every row holds the same number of
targets: true of every loader here (a corpus row is `context` targets, an MQAR row `n_queries`
answers). The sums run in another order, so results agree up to floating-point reduction order.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from foxwb.workbench.data.corpus import Batch
from foxwb.workbench.spec.errors import SpecError


@dataclass(frozen=True)
class Shard:
    """Worker ``rank`` of ``workers`` for steps of ``grad_accum`` micro-batches of ``batch_size``."""

    rank: int
    workers: int
    batch_size: int
    grad_accum: int

    @property
    def rows(self) -> int:
        """Sequences this worker trains on per step."""
        return self.batch_size * self.grad_accum // self.workers

    @property
    def micro_rows(self) -> int:
        """Sequences per forward pass: the largest divisor of ``rows`` that is at most batch_size."""
        return max(d for d in range(1, min(self.rows, self.batch_size) + 1) if self.rows % d == 0)

    @property
    def micro_batches(self) -> int:
        """Forward and backward passes per step on this worker (its gradient accumulation)."""
        return self.rows // self.micro_rows

    def segments(self, micro: int) -> list[tuple[int, int, int]]:
        """Where local micro-batch ``micro`` lies in the spec's micro-batches: (spec micro-batch,
        first row, end row) pieces, in order."""
        start = self.rank * self.rows + micro * self.micro_rows
        end, out = start + self.micro_rows, []
        while start < end:
            m, row = divmod(start, self.batch_size)
            stop = min(self.batch_size, row + end - start)
            out.append((m, row, stop))
            start += stop - row
        return out


def plan_shard(train, rank: int, workers: int) -> Shard:
    """Worker ``rank``'s share of a step of the TrainSpec ``train``; an error naming the fields
    when the global batch does not split evenly into ``workers`` blocks."""
    check_divisible(train, workers)
    return Shard(rank, workers, train.batch_size, train.grad_accum)


def check_divisible(train, workers: int) -> None:
    rows = train.batch_size * train.grad_accum
    if rows % workers:
        fits = [n for n in range(1, rows + 1) if rows % n == 0]
        raise SpecError(
            f"train.workers={workers}: the global batch (train.batch_size {train.batch_size} x train.grad_accum "
            f"{train.grad_accum} = {rows} sequences) does not split evenly over {workers} workers; use a worker "
            f"count that divides {rows} ({', '.join(map(str, fits[:12]))}{', ...' if len(fits) > 12 else ''}) "
            f"or change batch_size / grad_accum")


def shard_batches(data, seed: int, step: int, shard: Shard) -> list[Batch]:
    """This worker's micro-batches of ``step``, each spec micro-batch drawn once."""
    drawn: dict[int, Batch] = {}
    out = []
    for micro in range(shard.micro_batches):
        xs, ys = [], []
        for m, first, stop in shard.segments(micro):
            if m not in drawn:
                drawn[m] = data.train_batch(seed, step, m, shard.batch_size)
            xs.append(drawn[m].x[first:stop])
            ys.append(drawn[m].y[first:stop])
        out.append(Batch(torch.cat(xs), torch.cat(ys)))
    return out
