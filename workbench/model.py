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

from foxwb.kernels import forgetting_attention
from foxwb.workbench.execution import Execution
from foxwb.workbench.spec.trial import ModelSpec


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

    def _projections(self) -> list[tuple[str, nn.Linear]]:
        """(name, Linear of x) for q, k, v and for each component that declares input_projections()."""
        out = [("q", self.wq), ("k", self.wk), ("v", self.wv)]
        # The output gate's d columns before the forget gate's H: they start 16-byte aligned in
        # the projection and in its gradient, so the kernels that read and write them vectorise.
        for slot in ("kv_shift", "output_gate", "forget_gate"):
            module = getattr(self, slot)
            if module is not None and hasattr(module, "input_projections"):
                out += [(f"{slot}.{name}", lin) for name, lin in module.input_projections().items()]
        return out

    def _uses_fused_qkv(self, x: torch.Tensor) -> bool:
        """kernels.prepare_qkv covers KV-shift and QK-norm modules that declare they compute its
        math (``qkv_prep_shift()`` / ``qkv_prep_norm()``; docs/models.md, "Faster paths a component
        may opt into"); a module without the declaration keeps the per-component path, which is
        always correct."""
        ex = self.execution
        if self.kv_shift is None and self.qk_norm is None or not ex.fuse_projections or ex.fused_qkv is False:
            return False
        if not (self.kv_shift is None or hasattr(self.kv_shift, "qkv_prep_shift")):
            return False
        if not (self.qk_norm is None or hasattr(self.qk_norm, "qkv_prep_norm")):
            return False
        return ex.fused_qkv or x.is_cuda

    @staticmethod
    def _linear(x: torch.Tensor, projections: list[tuple[str, nn.Linear]]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """One matmul for several Linears of x: (the output with its padding, each one's slice)."""
        weights = [lin.weight for _, lin in projections]
        sizes = [w.shape[0] for w in weights]
        pad = -sum(sizes) % 64  # keeps the output's rows 128-byte aligned for the matmul
        if pad:
            weights.append(weights[0].new_zeros(pad, x.shape[-1]))
        out = F.linear(x, torch.cat(weights))
        return out, list(out.split(sizes + [pad], dim=-1)[: len(sizes)])

    @staticmethod
    def _named(projections: list[tuple[str, nn.Linear]], outputs) -> dict[str, torch.Tensor]:
        # Biases (the forget gate's) are added to their own slice, not as one concatenated bias:
        # that one's gradient summed the whole (B * T, 3d + ...) output gradient over tokens,
        # 0.7 ms per step at 125M (docs/performance.md), for a dozen columns.
        return {name: t if lin.bias is None else t + lin.bias for (name, lin), t in zip(projections, outputs)}

    def _project(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        projections = self._projections()
        if not self.execution.fuse_projections:
            return {name: lin(x) for name, lin in projections}
        return self._named(projections, self._linear(x, projections)[1])

    def _fused_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """q, k, v (B, T, H, D) with KV-shift and QK-norm applied, and the other projections by
        name, through kernels.prepare_qkv: the projection is still one matmul, whose gates'
        columns come back as a view; their gradients and those of q, k, v are written into one
        gradient of that matmul's output, by the kernel."""
        # Imported here: Triton reads TRITON_INTERPRET when it first decorates the kernel.
        from foxwb.kernels.qkv_prep.op import prepare_qkv

        shift, norm = self.kv_shift, self.qk_norm
        projections = self._projections()
        n = 3 + len(shift.input_projections() if shift is not None else {})
        k_shift, v_shift = shift.qkv_prep_shift() if shift is not None else (False, False)
        q_weight, k_weight, eps = norm.qkv_prep_norm() if norm is not None else (None, None, 1e-5)
        proj, _ = self._linear(x, projections)
        # One view per component's columns: each one's gradient comes back a tensor of its own,
        # which the kernel copies into d proj (joined, they cost a concatenating kernel).
        q, k, v, rest = prepare_qkv(proj, self.n_heads, self.head_dim, k_shift=k_shift, v_shift=v_shift,
                                    q_weight=q_weight, k_weight=k_weight, eps=eps,
                                    rest=[lin.weight.shape[0] for _, lin in projections[n:]])
        return q, k, v, self._named(projections[n:], rest)

    def _component(self, slot: str, projected: dict, *args):
        """Call a slot's module; one that declares input_projections() gets its outputs."""
        module = getattr(self, slot)
        if not hasattr(module, "input_projections"):
            return module(*args)
        prefix = slot + "."
        return module(*args, projected={k[len(prefix):]: v for k, v in projected.items() if k.startswith(prefix)})

    def attention_inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, dict]:
        """q, k, v (B, T, H, D) with KV-shift, QK-norm and RoPE applied, log f (B, T, H) fp32 or
        None, and the projections the later slots use, from the pre-normed block input x (B, T, d)."""
        B, T, d = x.shape
        if self._uses_fused_qkv(x):
            q, k, v, projected = self._fused_qkv(x)  # (B, T, H, D), KV-shift and QK-norm applied
        else:
            projected = self._project(x)
            q = projected["q"].view(B, T, self.n_heads, self.head_dim)  # (B, T, H, D)
            k = projected["k"].view(B, T, self.n_heads, self.head_dim)
            v = projected["v"].view(B, T, self.n_heads, self.head_dim)
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
                                 log_pruning_tolerance=self.log_pruning_tolerance)  # (B, T, H, D)
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
        # A component's own init of some of its Linears' parameters (the forget gate's bias):
        # apply() visits a module after its children, so this comes after the lines above.
        if hasattr(module, "init_overrides"):
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
