"""The ``wb`` command line."""
from __future__ import annotations

import argparse
import sys

from workbench.errors import SpecError


def _load_model_spec(target: str):
    from workbench.errors import read_yaml, validate
    from workbench.presets import PRESETS
    from workbench.specs import ModelSpec

    if target in PRESETS:
        return ModelSpec(preset=target)
    data = read_yaml(target)
    # A trial file holds its model under `model`; a model file is the ModelSpec itself.
    if isinstance(data, dict) and "model" in data and isinstance(data["model"], dict):
        data = data["model"]
    return validate(ModelSpec, data, target)


def cmd_info(args: argparse.Namespace) -> int:
    from workbench.info import flops_per_token, param_breakdown, param_counts

    spec = _load_model_spec(args.spec)
    counts, parts = param_counts(spec), param_breakdown(spec)
    flops = flops_per_token(spec, args.context)
    slots = ", ".join(f"{k}={getattr(spec.attention, k).kind}" for k in type(spec.attention).model_fields)
    print(f"model        {spec.n_layers} x {spec.d_model}, {spec.n_heads} heads of {spec.head_dim}, vocab {spec.vocab_size}")
    print(f"attention    {slots}")
    print(f"mlp / norm   {spec.mlp.kind} / {spec.norm.kind}")
    print(f"spec hash    {spec.spec_hash()}")
    print(f"params       total {counts['total']:,}   without input embedding {counts['non_embedding']:,}"
          f"   blocks + final norm {counts['blocks']:,}")
    print("per component (summed over layers):")
    for name, n in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<24} {n:>14,}  {100 * n / counts['total']:5.1f}%")
    print(f"FLOPs/token  forward {flops['forward']:.3e}   train (3x) {flops['train']:.3e}   at context {args.context}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.errors import read_yaml, validate
    from workbench.specs import TrialSpec
    from workbench.train import TrainError
    from workbench.trial import run_trial

    trial = validate(TrialSpec, read_yaml(args.trial), args.trial)
    out = Path(args.out)
    if not args.resume and (out / "checkpoint.pt").exists():
        (out / "checkpoint.pt").unlink()
    print(f"trial {trial.spec_hash()}  ->  {out}", file=sys.stderr)
    try:
        result = run_trial(trial, out, progress=True)
    except TrainError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    rate = f"{result['tokens_per_s']:,.0f} tokens/s" if result["tokens_per_s"] else "n/a"
    mfu = f", MFU {100 * result['mfu']:.1f}%" if result["mfu"] else ""
    print(f"val_loss {result['val_loss']:.4f} nats/token (ppl {result['val_ppl']:.3f}); unigram entropy "
          f"{result['unigram_entropy']:.4f}; {rate}{mfu}; {result['n_params']:,} params")
    for length, ppl in result["ppl_at_length"].items():
        print(f"  P({length}) = {ppl:.3f}")
    print(f"wrote {out / 'result.json'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wb", description="The FoX ablation workbench.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="parameter counts and FLOPs of a model spec or preset")
    p.add_argument("spec", help="a preset name (fox_pro, ...) or a YAML model/trial file")
    p.add_argument("--context", type=int, default=2048, help="context length for FLOPs (tokens)")
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("train", help="train and evaluate one trial; writes DIR/result.json")
    p.add_argument("trial", help="a trial YAML file (model, data, train, eval, seed)")
    p.add_argument("--out", required=True, help="output folder: checkpoint, metrics.jsonl, result.json")
    p.add_argument("--no-resume", dest="resume", action="store_false",
                   help="start from scratch even if DIR holds a checkpoint of this trial")
    p.set_defaults(func=cmd_train)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
