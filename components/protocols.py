"""The optional hooks a component's module may implement, one ``typing.Protocol`` each.

The block calls a slot's module through its ``forward`` (docs/models.md, "Adding a component kind
from another package"); a module may also implement one of these hooks to take a faster path or
to own part of its init (docs/models.md, "Faster paths a component may opt into"). The model asks
``isinstance(module, ProjectsInput)`` and so on; a module without a hook keeps the plain path,
which is always correct. Because a misspelt hook would silently never be called, the registry
refuses a kind whose module class has a method named like a hook but not quite, or named as one
but with other parameters (``hook_problem``, called by ``registry.register``).

A component may also give one of its parameters an ``lr_scale`` attribute (``set_lr_scale``): the
optimizer trains it at that multiple of the schedule's learning rate (``lr_scale_of``).
"""
from __future__ import annotations

import difflib
import inspect
from typing import Iterable, Protocol, runtime_checkable

import torch
import torch.nn as nn


@runtime_checkable
class ProjectsInput(Protocol):
    """A module that projects the block input x (B, T, d) with ``nn.Linear`` layers of its own
    (the forget gate, KV-shift, output gate). The block computes them in the same matmul as q, k
    and v (a bias added to the module's own slice) and calls the module's ``forward`` with
    ``projected={name: Linear(x)}`` as a keyword, so its ``forward`` must accept ``projected``.
    The parameters stay the module's (their state-dict names do not change)."""

    def input_projections(self) -> dict[str, nn.Linear]:
        """{name: Linear of x}, in a fixed order: the order their columns take in the matmul."""
        ...


@runtime_checkable
class FusedShift(Protocol):
    """A KV-shift module that computes exactly kernels.prepare_qkv's token shift, its input
    projections being the k mixing logits, then the v ones (ProjectsInput). On CUDA the block
    then runs it through that kernel and never calls its ``forward``."""

    def qkv_prep_shift(self) -> tuple[bool, bool]:
        """(k shifted, v shifted)."""
        ...


@runtime_checkable
class FusedQKNorm(Protocol):
    """A QK-norm module that computes exactly kernels.prepare_qkv's per-head RMSNorm of q and k.
    On CUDA the block then runs it through that kernel and never calls its ``forward``."""

    def qkv_prep_norm(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(q scale, k scale, eps); the scales (H, D) or (D,)."""
        ...


@runtime_checkable
class OwnsInit(Protocol):
    """A module that initialises some of its parameters itself (the forget gate's bias). The
    model's init calls it after drawing every Linear's weight N(0, init_std) and zeroing its bias,
    the module's own Linears included."""

    def init_overrides(self) -> None:
        ...


PROTOCOLS: tuple[type, ...] = (ProjectsInput, FusedShift, FusedQKNorm, OwnsInit)


def _hook_of(protocol: type) -> str:
    return next(name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_"))


# Hook name -> its protocol.
HOOKS: dict[str, type] = {_hook_of(p): p for p in PROTOCOLS}


def _parameters(function, bound: bool) -> list[inspect.Parameter]:
    params = list(inspect.signature(function).parameters.values())
    return params[1:] if bound else params  # without self (or cls)


def hook_signature(hook: str) -> str:
    """``name(a, b)``: the hook's parameters, self left out (every hook takes none today)."""
    return f"{hook}({', '.join(p.name for p in _parameters(getattr(HOOKS[hook], hook), True))})"


def _methods(cls: type):
    """(defining class, name, raw attribute) of every method the module class defines itself or
    inherits from a class that is not torch's (nn.Module's own methods are not a plug-in's)."""
    for klass in cls.__mro__:
        if klass is object or klass.__module__.split(".")[0] == "torch":
            continue
        for name, raw in vars(klass).items():
            if inspect.isfunction(raw) or isinstance(raw, (staticmethod, classmethod)):
                yield klass, name, raw


def hook_problem(cls: type) -> str | None:
    """What is wrong with the hooks of the module class ``cls``, as the end of a sentence, or None:
    a public method within a small edit distance of a hook's name (``qkv_prep_shfit``), a hook
    whose parameters are not the hook's, or input_projections with a ``forward`` that takes no
    ``projected``."""
    for klass, name, raw in _methods(cls):
        if name in HOOKS:
            function = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
            got = [p.name for p in _parameters(function, not isinstance(raw, staticmethod))]
            want = [p.name for p in _parameters(getattr(HOOKS[name], name), True)]
            if got != want:
                return (f"method {klass.__qualname__}.{name}({', '.join(got)}) does not take the parameters of the "
                        f"fast-path hook {hook_signature(name)} (it would fail when called); give it those, "
                        f"or another name if it is not meant as that hook")
        elif not name.startswith("_"):
            near = difflib.get_close_matches(name, HOOKS, n=1, cutoff=0.85)
            if near:
                return (f"method {name!r} of {klass.__qualname__} looks like the fast-path hook {near[0]!r} "
                        f"misspelt (it would never be called); rename it, or if it is not meant as that hook, "
                        f"give it a name further from it (or a leading underscore)")
    if any(name == "input_projections" for _, name, _ in _methods(cls)):
        params = inspect.signature(cls.forward).parameters.values()
        if not any(p.name == "projected" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return (f"{cls.__qualname__} declares input_projections() but its forward takes no 'projected' "
                    f"(the block passes projected={{name: tensor}}); add 'projected: dict | None = None' to it")
    return None


LR_SCALE = "lr_scale"  # the attribute a component sets on a parameter


def set_lr_scale(params: Iterable[nn.Parameter], scale: float) -> None:
    """Train ``params`` at ``scale`` times the schedule's learning rate, in an optimizer group of
    their own (workbench/train/steps.py, make_optimizer)."""
    for p in params:
        setattr(p, LR_SCALE, scale)


def lr_scale_of(p: nn.Parameter) -> float:
    """The multiple of the learning rate ``p`` trains at: its component's ``set_lr_scale``, else 1."""
    return float(getattr(p, LR_SCALE, 1.0))
