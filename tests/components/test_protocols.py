"""The optional hooks of a component's module (components/protocols.py): the built-in kinds satisfy
the protocols of the fast paths they take, a plain module does none, and a kind whose module
misspells a hook or gives one other parameters is refused at registration, by decorator or as a
plug-in loaded by entry point."""
import sys
import types
from typing import Literal

import pytest
import torch
import torch.nn as nn

from foxwb import components
from foxwb.components import registry
from foxwb.components.protocols import FusedQKNorm, FusedShift, OwnsInit, ProjectsInput, hook_problem
from foxwb.workbench.execution import Execution
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.trial import ModelSpec

dims = components.BlockDims(24, 3)


@pytest.fixture
def scratch_registry(monkeypatch):
    """register() into copies of the registry's tables, put back after the test."""
    components.kinds("qk_norm")  # the entry points loaded first, into the real tables
    monkeypatch.setattr(registry, "_REGISTRY", {slot: dict(kinds) for slot, kinds in registry._REGISTRY.items()})
    monkeypatch.setattr(registry, "_ORIGIN", dict(registry._ORIGIN))
    return registry._REGISTRY


def spec_building(module_cls):
    """An options class of the kv_shift slot, kind ``test_kind``, whose build returns ``module_cls()``."""

    class Spec(components.ComponentSpec):
        slot = "kv_shift"
        kind: Literal["test_kind"] = "test_kind"

        def build(self, dims):
            return module_cls()

    return Spec


class Shift(nn.Module):
    """A KV-shift that leaves k and v as they are, with every hook spelt right."""

    def __init__(self):
        super().__init__()
        self.k_alpha = nn.Linear(24, 3, bias=False)

    def input_projections(self):
        return {"k": self.k_alpha}

    def qkv_prep_shift(self):
        return True, False

    def init_overrides(self):
        pass

    def _qkv_prep_shfit(self):  # private: a helper may be named so
        pass

    def forward(self, x, k, v, projected=None):
        return k, v


@pytest.mark.parametrize("typo,hook", [("qkv_prep_shfit", "qkv_prep_shift"), ("input_projection", "input_projections"),
                                       ("init_override", "init_overrides"), ("qkv_prep_nrom", "qkv_prep_norm")])
def test_a_misspelt_hook_is_refused_at_registration_with_a_sentence(scratch_registry, typo, hook):
    Misspelt = type("Misspelt", (Shift,), {typo: lambda self: (True, True)})
    with pytest.raises(ValueError) as refused:
        registry.register(spec_building(Misspelt))
    assert str(refused.value) == (
        f"component 'test_kind' for slot 'kv_shift': method '{typo}' of Misspelt looks like the fast-path hook "
        f"'{hook}' misspelt (it would never be called); rename it, or if it is not meant as that hook, give it a "
        f"name further from it (or a leading underscore)")
    assert "test_kind" not in scratch_registry["kv_shift"]


@pytest.mark.parametrize("hook", ["input_projections", "qkv_prep_shift", "qkv_prep_norm", "init_overrides"])
def test_a_hook_with_other_parameters_is_refused(scratch_registry, hook):
    MisSigned = type("MisSigned", (Shift,), {hook: lambda self, x: None})
    with pytest.raises(ValueError, match=rf"component 'test_kind' for slot 'kv_shift': method MisSigned\.{hook}\(x\) "
                                         rf"does not take the parameters of the fast-path hook {hook}\(\)"):
        registry.register(spec_building(MisSigned))
    assert "test_kind" not in scratch_registry["kv_shift"]


def test_input_projections_without_projected_in_forward_is_refused(scratch_registry):
    class NoProjected(Shift):
        def forward(self, x, k, v):
            return k, v

    with pytest.raises(ValueError, match="NoProjected declares input_projections\\(\\) but its forward takes no 'projected'"):
        registry.register(spec_building(NoProjected))


def test_a_plugin_with_its_hooks_spelt_right_registers_and_builds(scratch_registry):
    spec = registry.register(spec_building(Shift))
    assert scratch_registry["kv_shift"]["test_kind"] is spec
    module = components.parse("kv_shift", "test_kind").build(dims)
    assert isinstance(module, ProjectsInput) and isinstance(module, FusedShift) and isinstance(module, OwnsInit)


def test_a_plugin_registered_by_decorator_before_its_module_class_is_left_out_when_loaded(scratch_registry, monkeypatch, capsys):
    """An entry point that names a module whose @register runs before the module class it builds is
    defined: checked again once the module is imported whole, left out with one warning."""
    plugin = types.ModuleType("wb_test_late_plugin")

    class Late(components.ComponentSpec):
        slot = "qk_norm"
        kind: Literal["late"] = "late"

        def build(self, dims):
            return LateNorm()  # noqa: F821  (defined in the plug-in's module after the decorator ran)

    Late.__module__ = plugin.__name__

    def load():
        registry.register(Late)  # the decorator, while LateNorm does not exist yet
        assert "late" in registry._REGISTRY["qk_norm"]
        plugin.LateNorm = type("LateNorm", (nn.Module,), {"__module__": plugin.__name__,
                                                          "qkv_prep_nrom": lambda self: None,
                                                          "forward": lambda self, q, k: (q, k)})
        return plugin

    monkeypatch.setitem(sys.modules, plugin.__name__, plugin)
    ep = types.SimpleNamespace(name="late", value="wb_test_late_plugin", dist=types.SimpleNamespace(name="wb-late", version="0.1"),
                               load=load)
    monkeypatch.setattr(registry, "entry_points", lambda group: [ep])
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    registry.load_entry_points()
    warning = capsys.readouterr().err
    assert warning.startswith("warning: plug-in wb-late 0.1 (entry point late = wb_test_late_plugin in workbench.components) "
                              "is not loaded: ValueError: component 'late' for slot 'qk_norm': method 'qkv_prep_nrom' of "
                              "LateNorm looks like the fast-path hook 'qkv_prep_norm' misspelt"), warning
    assert "late" not in registry._REGISTRY["qk_norm"] and ("qk_norm", "late") not in registry._ORIGIN


@pytest.mark.parametrize("slot", components.SLOTS)
def test_every_built_in_kind_registers_and_its_module_is_one_the_check_sees(slot, scratch_registry):
    for kind in components.kinds(slot):
        cls = components.options_class(slot, kind)
        del scratch_registry[slot][kind]
        assert registry.register(cls) is cls  # refused, it would raise
        module = cls().build(dims)
        if module is not None and type(module).__module__.split(".")[0] != "torch":
            assert type(module) in registry.module_classes(cls), (slot, kind)
            assert hook_problem(type(module)) is None, (slot, kind)


@pytest.mark.parametrize("kind", ["k", "v", "kv"])
def test_the_built_in_kv_shift_kinds_take_the_fused_path(kind):
    shift = components.parse("kv_shift", kind).build(dims)
    assert isinstance(shift, FusedShift) and isinstance(shift, ProjectsInput)
    assert shift.qkv_prep_shift() == (kind in ("k", "kv"), kind in ("v", "kv"))


def test_the_built_in_qk_norm_takes_the_fused_path_and_a_plain_module_takes_none():
    assert isinstance(components.parse("qk_norm", "rmsnorm").build(dims), FusedQKNorm)
    gate = components.parse("forget_gate", "data_dependent").build(dims)
    assert isinstance(gate, ProjectsInput) and isinstance(gate, OwnsInit)
    for plain in (nn.Identity(), components.parse("output_norm", "rmsnorm").build(dims),
                  components.parse("forget_gate", "fixed").build(dims)):
        for protocol in (ProjectsInput, FusedShift, FusedQKNorm, OwnsInit):
            assert not isinstance(plain, protocol), (plain, protocol)


def test_each_module_gets_its_own_slots_projections_by_name(monkeypatch):
    """The block hands each declaring module the outputs of its own input_projections(), keyed as
    it named them, on the per-component path and on the one-matmul path."""
    seen = []
    for cls in (type(components.parse(s, k).build(dims)) for s, k in
                (("kv_shift", "kv"), ("forget_gate", "data_dependent"), ("output_gate", "sigmoid"))):
        real = cls.forward

        def spy(self, *args, projected=None, _real=real):
            seen.append((type(self).__name__, sorted(projected), [tuple(t.shape) for _, t in sorted(projected.items())]))
            return _real(self, *args, projected=projected)

        monkeypatch.setattr(cls, "forward", spy)
    spec = ModelSpec(preset="fox_pro", vocab_size=32, d_model=24, n_layers=1, n_heads=3)
    for fuse in (False, True):
        seen.clear()
        model = build_model(spec, Execution(attention_backend="reference", fuse_projections=fuse, fused_qkv=False,
                                            fused_loss=False))
        model(torch.zeros(2, 5, dtype=torch.long))
        assert seen == [("KVShift", ["k", "v"], [(2, 5, 3), (2, 5, 3)]),
                        ("DataDependentGate", ["logit"], [(2, 5, 3)]),
                        ("OutputGate", ["gate"], [(2, 5, 24)])], fuse
