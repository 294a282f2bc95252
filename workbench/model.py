"""Model assembly: a decoder-only LM whose attention block is put together from component slots.

Reads top to bottom: Attention (the slots in the order of docs/fox-notes.md, "One attention
layer"), Block (pre-norm residual), LM (embedding, blocks, final norm, head), build_model. How the
model runs (backend, fused paths) is the frozen Execution given to build_model, not module state.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize

from foxwb.components.protocols import HOOKS, FusedQKNorm, FusedShift, OwnsInit, ProjectsInput
from foxwb.kernels import forgetting_attention
from foxwb.workbench.execution import Execution
from foxwb.workbench.spec.trial import ModelSpec

# The fast-path hooks' names, as the Protocols state them (components/protocols.py). The block asks
# a module for them as it runs (hasattr): a module swapped in after the build is asked too, and a
# compiled forward traces a plain attribute check, not a Protocol's isinstance.
_HOOK = {protocol: name for name, protocol in HOOKS.items()}
_PROJECTS, _SHIFT, _NORM = _HOOK[ProjectsInput], _HOOK[FusedShift], _HOOK[FusedQKNorm]

# The block input's projections that components declared, by slot: slot -> {name: (B, T, width)},
# each slot's dict what its module's forward gets as ``projected``.
SlotProjections = dict[str, dict[str, torch.Tensor]]


def stored_weight(module: nn.Module) -> nn.Parameter:
    """The trained parameter behind ``module.weight``: the weight itself, or for a parametrised one
    (torch.nn.utils.parametrize: the KV-shift's normalised mixing weights) the original it is computed
    from at each use. Init draws it and weight decay applies to it as to a plain weight."""
    if parametrize.is_parametrized(module, "weight"):
        return module.parametrizations.weight.original
    return module.weight


class Attention(nn.Module):
    def __init__(self, spec: ModelSpec, execution: Execution = Execution()):
        super().__init__()
        self.execution = execution
        d, dims, slots = spec.d_model, spec.dims, spec.attention
        self.n_heads, self.head_dim = spec.n_heads, spec.head_dim
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, d, bias=False)
        self.wv = nn.Linear(d, d, bias=False)
        self.kv_shift = slots.kv_shift.build(dims)
        self.qk_norm = slots.qk_norm.build(dims)
        self.rope = slots.rope.build(dims)
        self.forget_gate = slots.forget_gate.build(dims)
        self.output_norm = slots.output_norm.build(dims)
        self.output_gate = slots.output_gate.build(dims)
        self.wo = nn.Linear(d, d, bias=False)
        self.log_pruning_tolerance = slots.log_pruning_tolerance
        self.window = slots.window

    def _input_projections(self) -> dict[str, dict[str, nn.Linear]]:
        """slot -> {name: Linear of x} of each module that declares input_projections()
        (components/protocols.py, ProjectsInput), in the order their columns take in the block's
        one matmul, after q, k and v."""
        # The output gate's d columns before the forget gate's H: they start 16-byte aligned in the
        # projection and in its gradient, so the kernels that read and write them vectorise.
        modules = ((slot, getattr(self, slot)) for slot in ("kv_shift", "output_gate", "forget_gate"))
        return {slot: module.input_projections() for slot, module in modules if hasattr(module, _PROJECTS)}

    def _projections(self) -> list[tuple[str, nn.Linear]]:
        """(label, Linear of x) in the matmul's order: q, k, v, then ``slot.name`` for each
        component's (a label for reading; the block passes projections on by slot, not by it)."""
        return [("q", self.wq), ("k", self.wk), ("v", self.wv)] + [
            (f"{slot}.{name}", lin) for slot, named in self._input_projections().items() for name, lin in named.items()]

    def _uses_fused_qkv(self, x: torch.Tensor) -> bool:
        """kernels.prepare_qkv covers KV-shift and QK-norm modules that declare they compute its
        math (components/protocols.py: FusedShift's ``qkv_prep_shift()``, FusedQKNorm's
        ``qkv_prep_norm()``; docs/models.md, "Faster paths a component may opt into"); a module
        without the declaration keeps the per-component path, which is always correct."""
        ex = self.execution
        if self.kv_shift is None and self.qk_norm is None or not ex.fuse_projections or ex.fused_qkv is False:
            return False
        if not (self.kv_shift is None or hasattr(self.kv_shift, _SHIFT)):
            return False
        if not (self.qk_norm is None or hasattr(self.qk_norm, _NORM)):
            return False
        return ex.fused_qkv or x.is_cuda

    @staticmethod
    def _linear(x: torch.Tensor, linears: list[nn.Linear]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """One matmul for several Linears of x: (the output with its padding, each one's slice)."""
        weights = [lin.weight for lin in linears]
        sizes = [w.shape[0] for w in weights]
        pad = -sum(sizes) % 64  # keeps the output's rows 128-byte aligned for the matmul
        if pad:
            weights.append(weights[0].new_zeros(pad, x.shape[-1]))
        out = F.linear(x, torch.cat(weights))
        return out, list(out.split(sizes + [pad], dim=-1)[: len(sizes)])

    @staticmethod
    def _with_biases(linears: list[nn.Linear], outputs) -> list[torch.Tensor]:
        # Biases (the forget gate's) are added to their own slice, not as one concatenated bias:
        # that one's gradient summed the whole (B * T, 3d + ...) output gradient over tokens,
        # 0.7 ms per step at 125M (docs/performance.md), for a dozen columns.
        return [t if lin.bias is None else t + lin.bias for lin, t in zip(linears, outputs)]

    @staticmethod
    def _by_slot(named: dict[str, dict[str, nn.Linear]], outputs: list[torch.Tensor]) -> SlotProjections:
        """The outputs of ``named``'s Linears, in its order, put back under their slots and names."""
        it = iter(outputs)
        return {slot: {name: next(it) for name in linears} for slot, linears in named.items()}

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, SlotProjections]:
        """q, k, v (B, T, d) and the components' projections of x, by slot."""
        named = self._input_projections()
        linears = [self.wq, self.wk, self.wv] + [lin for by_name in named.values() for lin in by_name.values()]
        if self.execution.fuse_projections:
            outputs = self._with_biases(linears, self._linear(x, linears)[1])
        else:
            outputs = [lin(x) for lin in linears]
        q, k, v, *rest = outputs
        return q, k, v, self._by_slot(named, rest)

    def _fused_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, SlotProjections]:
        """q, k, v (B, T, H, D) with KV-shift and QK-norm applied, and the other projections by
        slot, through kernels.prepare_qkv: the projection is still one matmul, whose gates'
        columns come back as a view; their gradients and those of q, k, v are written into one
        gradient of that matmul's output, by the kernel."""
        # Imported here: Triton reads TRITON_INTERPRET when it first decorates the kernel.
        from foxwb.kernels.qkv_prep.op import prepare_qkv

        shift, norm = self.kv_shift, self.qk_norm
        named = self._input_projections()
        shift_logits = list(named.pop("kv_shift", {}).values())  # the kernel reads these columns itself
        rest = [lin for by_name in named.values() for lin in by_name.values()]
        k_shift, v_shift = shift.qkv_prep_shift() if shift is not None else (False, False)
        q_weight, k_weight, eps = norm.qkv_prep_norm() if norm is not None else (None, None, 1e-5)
        proj, _ = self._linear(x, [self.wq, self.wk, self.wv] + shift_logits + rest)
        # One view per component's columns: each one's gradient comes back a tensor of its own,
        # which the kernel copies into d proj (joined, they cost a concatenating kernel).
        q, k, v, outputs = prepare_qkv(proj, self.n_heads, self.head_dim, k_shift=k_shift, v_shift=v_shift,
                                       q_weight=q_weight, k_weight=k_weight, eps=eps,
                                       rest=[lin.weight.shape[0] for lin in rest])
        return q, k, v, self._by_slot(named, self._with_biases(rest, outputs))

    def _component(self, slot: str, projected: SlotProjections, *args):
        """Call a slot's module; one that declares input_projections() gets its outputs."""
        module = getattr(self, slot)
        if not hasattr(module, _PROJECTS):
            return module(*args)
        return module(*args, projected=projected[slot])

    def attention_inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None,
                                                         SlotProjections]:
        """q, k, v (B, T, H, D) with KV-shift, QK-norm and RoPE applied, log f (B, T, H) fp32 or
        None, and the projections the later slots use, by slot, from the pre-normed block input x (B, T, d)."""
        B, T, d = x.shape
        if self._uses_fused_qkv(x):
            q, k, v, projected = self._fused_qkv(x)  # (B, T, H, D), KV-shift and QK-norm applied
        else:
            q, k, v, projected = self._project(x)
            q = q.view(B, T, self.n_heads, self.head_dim)  # (B, T, H, D)
            k = k.view(B, T, self.n_heads, self.head_dim)
            v = v.view(B, T, self.n_heads, self.head_dim)
            if self.kv_shift is not None:
                k, v = self._component("kv_shift", projected, x, k, v)
            if self.qk_norm is not None:
                q, k = self.qk_norm(q, k)
        if self.rope is not None:
            q, k = self.rope(q, k)
        log_f = self._component("forget_gate", projected, x) if self.forget_gate is not None else None  # (B, T, H) fp32
        return q, k, v, log_f, projected

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape  # x is the pre-normed block input
        q, k, v, log_f, projected = self.attention_inputs(x)
        o = forgetting_attention(q, k, v, log_f, backend=self.execution.attention_backend,
                                 log_pruning_tolerance=self.log_pruning_tolerance, window=self.window)  # (B, T, H, D)
        if self.output_norm is not None:
            o = self.output_norm(o)
        if self.output_gate is not None:
            o = self._component("output_gate", projected, x, o)
        return self.wo(o.reshape(B, T, d))


class Block(nn.Module):
    def __init__(self, spec: ModelSpec, execution: Execution):
        super().__init__()
        self.attn_norm = spec.norm.build(spec.dims)
        self.attn = Attention(spec, execution)
        self.mlp_norm = spec.norm.build(spec.dims)
        self.mlp = spec.mlp.build(spec.dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class LM(nn.Module):
    def __init__(self, spec: ModelSpec, execution: Execution = Execution()):
        super().__init__()
        self.spec, self.execution = spec, execution
        self.embed = nn.Embedding(spec.vocab_size, spec.d_model)
        self.blocks = nn.ModuleList(Block(spec, execution) for _ in range(spec.n_layers))
        self.final_norm = spec.norm.build(spec.dims)
        self.head = nn.Linear(spec.d_model, spec.vocab_size, bias=False)
        self.apply(self._init)
        if spec.tie_embeddings:
            self.head.weight = self.embed.weight

    def _init(self, module: nn.Module) -> None:
        # docs/fox-notes.md, "Initialisation": every Linear and the embedding N(0, std), biases 0
        # (the forget gate's too); norm scales and component-owned parameters keep their own init.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(stored_weight(module), std=self.spec.init_std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        # A component's own init of some of its Linears' parameters (the forget gate's bias;
        # components/protocols.py, OwnsInit):
        # apply() visits a module after its children, so this comes after the lines above.
        if isinstance(module, OwnsInit):
            module.init_overrides()

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor | None = None,
                ignore_index: int = -100) -> torch.Tensor:
        """Logits (B, T, V); with ``targets`` (B, T) the mean cross-entropy instead. Taking the loss
        here puts it inside torch.compile's graph; on CUDA it is the fused head and loss of
        kernels.linear_cross_entropy (the (B, T, V) logits written once, as their gradient),
        elsewhere the fp32 log-softmax of the logits."""
        x = self.embed(tokens)  # (B, T, d)
        for block in self.blocks:
            x = block(x)
        h = self.final_norm(x)
        if targets is None:
            return self.head(h)
        fused = self.execution.fused_loss
        if fused if fused is not None else h.is_cuda:
            # Imported here: Triton reads TRITON_INTERPRET when it first decorates the kernel.
            from foxwb.kernels.loss.op import linear_cross_entropy

            w = self.head.weight
            if torch.is_autocast_enabled(h.device.type):
                # What autocast would do to the head's matmul: the custom op is not autocast-aware.
                dtype = torch.get_autocast_dtype(h.device.type)
                h, w = h.to(dtype), w.to(dtype)
            return linear_cross_entropy(h.flatten(0, 1), w, targets.flatten(), ignore_index)
        logits = self.head(h)
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=ignore_index)


def build_model(spec: ModelSpec, execution: Execution = Execution()) -> LM:
    """tokens (B, T) long -> logits (B, T, V), or the loss given targets; ``execution`` says how it
    runs (workbench/execution.py), never what it computes."""
    return LM(spec, execution)
