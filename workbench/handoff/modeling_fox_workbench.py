"""The transformers model of a model exported by `wb export --hf` (copied beside its weights).

The model is the workbench's own (foxwb.workbench.model.build_model from the config's ModelSpec),
wrapped in a PreTrainedModel: the logits are the workbench's, not a re-implementation's. Loading
needs the workbench installed (`pip install fox-workbench`, the version in config.json's
``foxwb``) and any plug-in distribution config.json's ``plugins`` names.
"""
import torch
import torch.nn.functional as F
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from .configuration_fox_workbench import FoxWorkbenchConfig

# In a try block: transformers' check of a remote file's imports skips these, so a loader without
# the workbench reads our sentence, not a `pip install foxwb` of a name that is not ours.
try:
    from foxwb.workbench.model import build_model
    from foxwb.workbench.spec.trial import ModelSpec
except ImportError as e:
    raise ImportError(
        "this model was exported by the FoX ablation workbench (`wb export --hf`) and is built by it: install "
        "the distribution fox-workbench (the version and commit config.json's 'foxwb' names) and the plug-ins "
        f"its 'plugins' names, then load it again ({e})") from e


def _check_no_left_padding(attention_mask):
    """Attention is causal over the whole row: right padding leaves the real tokens' logits as
    they are, but a masked token before a real one (left padding, holes) would be attended to."""
    if attention_mask is None:
        return
    mask = attention_mask.bool()
    # After a 0, every later position must be 0 too: the running minimum equals the mask.
    if not torch.equal(torch.cummin(mask.int(), dim=-1).values.bool(), mask):
        raise ValueError("attention_mask: a masked position before a real token (left padding) is not supported: "
                         "this model's attention is causal over the whole row, with no padding mask; pad on the "
                         "right (tokenizer.padding_side = 'right') or pass rows without padding")


class FoxWorkbenchForCausalLM(PreTrainedModel, GenerationMixin):
    config_class = FoxWorkbenchConfig
    base_model_prefix = "model"
    # A block keeps its residual stream on one device (device_map="auto").
    _no_split_modules = ["Block"]
    # Used only where config.tie_word_embeddings (the spec's tie_embeddings) is on.
    _tied_weights_keys = {"model.head.weight": "model.embed.weight"}

    def __init__(self, config):
        super().__init__(config)
        self.model = build_model(ModelSpec.model_validate(config.model_spec))
        self.post_init()

    # No KV cache: generate() feeds the whole row at each step (with a cache, or with transformers'
    # default inputs, it would feed the last token only, which this forward would read as a row of one).
    @classmethod
    def _supports_default_dynamic_cache(cls):
        return False

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def get_input_embeddings(self):
        return self.model.embed

    def set_input_embeddings(self, value):
        self.model.embed = value

    def get_output_embeddings(self):
        return self.model.head

    def set_output_embeddings(self, value):
        self.model.head = value

    @torch.no_grad()
    def _init_weights(self, module):
        """Every parameter comes from model.safetensors. transformers builds the model on the meta
        device and hands back the buffers that are not saved (RoPE's inverse frequencies) empty:
        they are computed again here, from a one-block model of the same spec on the CPU (every
        block is built from the same spec, so its buffers are every block's)."""
        names = [name for name, _ in module.named_buffers(recurse=False) if name in module._non_persistent_buffers_set]
        if not names:
            return
        path = next(p for p, m in self.named_modules() if m is module)
        fresh = self._fresh_buffers()
        for name in names:
            key = _one_block_name(f"{path}.{name}")
            getattr(module, name).copy_(fresh[key].to(getattr(module, name).dtype))

    def _fresh_buffers(self):
        if getattr(self, "_fresh_buffer_cache", None) is None:
            spec = ModelSpec.model_validate({**self.config.model_spec, "n_layers": 1})
            with torch.device("cpu"):
                one = build_model(spec)
            prefix = self.base_model_prefix
            self._fresh_buffer_cache = {f"{prefix}.{n}": b for n, b in one.named_buffers()}
        return self._fresh_buffer_cache

    def forward(self, input_ids, attention_mask=None, labels=None, return_dict=None, **kwargs):
        """input_ids (B, T) -> CausalLMOutput: logits (B, T, V); with labels (B, T) the mean
        cross-entropy of each position's prediction of the next label (-100 ignored), as
        transformers' causal LMs shift them."""
        _check_no_left_padding(attention_mask)
        logits = self.model(input_ids)
        loss = None
        if labels is not None:
            shifted = logits[:, :-1].float().flatten(0, 1)
            loss = F.cross_entropy(shifted, labels[:, 1:].flatten().to(logits.device), ignore_index=-100)
        if return_dict is False:
            return (logits,) if loss is None else (loss, logits)
        return CausalLMOutput(loss=loss, logits=logits)


def _one_block_name(name):
    """``model.blocks.7.attn.rope.inv_freq`` -> ``model.blocks.0.attn.rope.inv_freq``."""
    parts = name.split(".")
    if len(parts) > 2 and parts[1] == "blocks":
        parts[2] = "0"
    return ".".join(parts)
