"""The transformers config of a model exported by `wb export --hf` (copied beside its weights).

It carries the trial's whole ModelSpec as JSON (``model_spec``): the modelling code builds the
model from it with the workbench, so this file holds no architecture of its own. ``foxwb`` names
the workbench the export was made with (distribution version, git commit, source fingerprint),
``plugins`` the third-party component distributions the model needs installed, ``trial`` where
the weights come from (its spec hash, steps, tokens, trained context).
"""
from transformers import PretrainedConfig


class FoxWorkbenchConfig(PretrainedConfig):
    model_type = "fox_workbench"

    def __init__(self, model_spec=None, foxwb=None, plugins=None, trial=None, vocab_size=None,
                 tie_word_embeddings=False, **kwargs):
        self.model_spec = dict(model_spec or {})
        self.foxwb = dict(foxwb or {})
        self.plugins = dict(plugins or {})
        self.trial = dict(trial or {})
        # The usual names, for tools that read them (lm-eval, accelerate's device maps); the spec rules.
        self.vocab_size = vocab_size if vocab_size is not None else self.model_spec.get("vocab_size")
        self.hidden_size = self.model_spec.get("d_model")
        self.num_hidden_layers = self.model_spec.get("n_layers")
        self.num_attention_heads = self.model_spec.get("n_heads")
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
