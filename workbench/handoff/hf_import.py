"""transformers and safetensors, the optional `eval` extra, imported with a sentence when missing.

The repository's top-level folder ``kernels/`` (installed as foxwb.kernels) has the import name of
Hugging Face's ``kernels`` package, which transformers imports at its first model. Where the
checkout's root is on sys.path (pytest in the repository, `python -m` started there) the folder
would be found first and transformers' import fails; the installed ``kernels`` is imported first
instead, under its own name, with the checkout's root left out for that one import.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

EXTRA = "pip install -e '.[eval]' (in the workbench's checkout) or pip install 'fox-workbench[eval]'"


class MissingExtra(ImportError):
    """The `eval` extra is not installed; the message says what to install."""


def _installed_kernels_first() -> None:
    if "kernels" in sys.modules:
        return
    import foxwb.kernels  # where ours lies, to tell it from the installed one: torch at most, already loaded

    ours = Path(foxwb.kernels.__file__).resolve().parent
    found = importlib.util.find_spec("kernels")
    if found is None or found.origin is None or Path(found.origin).resolve().parent != ours:
        return
    saved = list(sys.path)
    sys.path[:] = [p for p in saved if Path(p or ".").resolve() != ours.parent]
    try:
        importlib.import_module("kernels")
    except ImportError:  # not installed: transformers then does without it
        pass
    finally:
        sys.path[:] = saved


def require_transformers():
    """The transformers module, ready to build models; MissingExtra if it or safetensors is absent."""
    try:
        _installed_kernels_first()
        # The optional extra, imported late: the workbench runs without it.
        import safetensors.torch  # noqa: F401
        import transformers
        from transformers import PreTrainedModel  # noqa: F401  (the lazy import that reaches kernels)
    except ImportError as e:
        raise MissingExtra(f"wb export --hf needs transformers and safetensors (the workbench's `eval` extra): "
                           f"{EXTRA} ({e})") from None
    return transformers
