"""Gradient norms by part of the model, for finding which part a gradient-norm spike comes from.

A part is a parameter's name with the block index replaced by ``*``
(``blocks.*.attn.forget_gate.proj.weight``: that parameter of every block together), so a model
has a few dozen parts whatever its depth.
With ``train.grad_norm_parts`` on, each step's history entry carries ``grad_norm_parts``: the
norm of each part's gradient before clipping (the squares of the parts sum to the square of
``grad_norm``). docs/stability.md says how spikes are traced with it."""
from __future__ import annotations

import re

import torch
from torch import nn

_BLOCK_INDEX = re.compile(r"\.\d+\.")
_PARAMETRISED = re.compile(r"\.parametrizations\.(\w+)\.original$")  # torch.nn.utils.parametrize's name


def part_of(name: str) -> str:
    """The part a parameter belongs to: its name without a wrapper's prefix, the block index ``*``;
    a parametrised attribute's original under the attribute's own name."""
    for prefix in ("module.", "_orig_mod."):
        name = name.removeprefix(prefix)
    return _BLOCK_INDEX.sub(".*.", _PARAMETRISED.sub(r".\1", name))


class GradParts:
    """The model's trained parameters grouped by part, in order of first appearance."""

    def __init__(self, model: nn.Module):
        groups: dict[str, list[nn.Parameter]] = {}
        for name, p in model.named_parameters():
            if p.requires_grad:
                groups.setdefault(part_of(name), []).append(p)
        self.names = list(groups)
        self._params = list(groups.values())

    def norms(self) -> torch.Tensor:
        """Each part's gradient norm (on the parameters' device), by the routine clip_grad_norm_
        uses for the whole; 0 for a part without one."""
        out = []
        for params in self._params:
            grads = [p.grad for p in params if p.grad is not None]
            out.append(nn.utils.get_total_norm(grads) if grads else torch.zeros((), device=params[0].device))
        return torch.stack(out)

    def named(self, values) -> dict[str, float]:
        return dict(zip(self.names, (float(v) for v in values)))
