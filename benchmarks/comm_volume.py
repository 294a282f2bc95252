"""Communication volume of a training step over N workers, counted: the bytes DDP all-reduces and
FSDP2 all-gathers and reduce-scatters per optimizer step, and the scaling estimate made from them.

    python benchmarks/comm_volume.py [TRIAL.yaml] [--workers 2] [--small] [--steps 3] [--out FILE]

Default trial: the paper's 125M FoX (Pro) (studies/throughput/fox_pro_125m.yaml), built on the
CPU. Each measurement spawns N processes (gloo) that run the workbench's own training loop
(foxwb.workbench.train.loop.train with foxwb.workbench.train.distributed.Workers: the model wrapped by DDP or FSDP2,
forward, backward, clipping, AdamW, the loss's mean over the workers) for ``--steps`` steps of
one sequence of ``--context`` tokens per worker: the volume depends on the parameters, not on
the batch or the context. A TorchDispatchMode sees every c10d collective a worker issues
(DDP's C++ reducer and FSDP2's all-gathers and reduce-scatters included); a step's volume is the
last step's (from one optimizer step to the next, after the first's one-off work).

Payload: the bytes a collective is about, per worker: the all-reduced buffers, the whole
(gathered) output of an all-gather, the whole input of a reduce-scatter. Traffic per worker
under a ring, NCCL's "bus bytes": all-reduce 2 (N - 1) / N x payload, all-gather and
reduce-scatter (N - 1) / N x payload; time = traffic / bus bandwidth. The dtype is the
parameters' (fp32, as on the GPU, where autocast leaves parameters and gradients fp32), so the
counts are the GPU's; what the CPU does not tell is the bandwidth (assumed, below).

The count is set beside a formula from the parameter count P (P_blocks in the blocks, P_root the
rest: embedding, head, final norm): DDP all-reduces 4 P bytes; FSDP2 (foxwb.workbench.train.distributed:
each block sharded, then the model) all-gathers each block in the forward and again in the
backward but the root once (FSDP2 keeps the root's parameters gathered from the forward into the
backward), 4 (2 P_blocks + P_root), and reduce-scatters 4 P. ``--small`` adds two small models
on 2 and 3 workers: the payload does not depend on N.

Then the estimate (docs/distributed.md): the measured one-GPU rate of the trial on an H200
(``--rate-from``, a train_throughput JSON), the measured traffic at N workers, the stated bus
bandwidths; speed-up over one GPU from no overlap (N t_c / (t_c + t_comm)) to perfect overlap
(N t_c / max(t_c, t_comm)).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.multiprocessing as mp
from torch.distributed.tensor import DTensor
from torch.multiprocessing.spawn import ProcessExitedException
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils._python_dispatch import TorchDispatchMode

import common
from foxwb.workbench.data.load import load_data
from foxwb.workbench.execution import Execution
from foxwb.workbench.model import build_model
from foxwb.workbench.spec.errors import read_yaml, validate
from foxwb.workbench.spec.trial import TrialSpec
from foxwb.workbench.train.distributed import Workers, init_process_group
from foxwb.workbench.train.loop import train

DEFAULT = "studies/throughput/fox_pro_125m.yaml"
RATE_FROM = "benchmarks/results/2026-12-01_nvidia-h200_train_throughput.json"
SMALL = [{"vocab_size": 512, "d_model": 128, "n_layers": 2, "n_heads": 2},
         {"vocab_size": 4096, "d_model": 256, "n_layers": 4, "n_heads": 4}]
# Assumed NCCL bus bandwidths (GB/s): within an 8-GPU NVSwitch node (H200, NVLink 4); across two
# such nodes with a 400 Gb/s InfiniBand NIC per GPU; across two nodes with one 100 Gb/s link each.
LINKS = {"NVLink": 360.0, "IB 400G per GPU": 45.0, "100G per node": 12.0}
# (GPUs, link, sequences of 4096 tokens per step)
ESTIMATE = [(2, "NVLink", 8), (8, "NVLink", 8), (8, "NVLink", 128), (16, "IB 400G per GPU", 8),
            (16, "IB 400G per GPU", 128), (16, "100G per node", 128)]
KINDS = {"allreduce": "all-reduce", "all_reduce": "all-reduce", "allgather": "all-gather",
         "all_gather": "all-gather", "reduce_scatter": "reduce-scatter", "broadcast": "broadcast"}


def _bytes(x) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_bytes(y) for y in x)
    return 0


def collective(name: str, args: tuple) -> tuple[str, int] | None:
    """(kind, payload bytes) of a c10d op, None for what moves nothing (waits, barriers)."""
    op = name.split(".")[1] if name.count(".") >= 1 else name
    kind = next((k for key, k in KINDS.items() if key in op), None)
    if kind is None:  # waits, barriers, DTensor's autograd wrapping: nothing moves
        return None
    functional = name.startswith("_c10d_functional")
    if kind == "all-gather":  # the whole output: c10d's (output, input, ...); functional (input, group_size, ...)
        return kind, _bytes(args[0]) * (int(args[1]) if functional else 1)
    if kind == "reduce-scatter":  # the whole input: c10d's (output, input, ...); functional (input, ...)
        return kind, _bytes(args[0] if functional else args[1])
    return kind, _bytes(args[0])


def counter():
    """A TorchDispatchMode counting the payload of every c10d collective by kind."""
    class Collectives(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes: dict[str, int] = {}
            self.calls: dict[str, int] = {}
            self.ignored: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if any(issubclass(t, DTensor) for t in types):
                # FSDP2's sharded parameters and gradients: DTensor turns the op into plain ops and
                # collectives first (the gradient norm's all-reduce), which then come here (as in
                # torch's CommDebugMode).
                return NotImplemented
            name = str(func)
            if "c10d" in name.split(".")[0]:
                seen = collective(name, args)
                if seen is None:
                    self.ignored.add(name)
                else:
                    kind, size = seen
                    self.bytes[kind] = self.bytes.get(kind, 0) + size
                    self.calls[kind] = self.calls.get(kind, 0) + 1
            return func(*args, **(kwargs or {}))

        def snapshot(self) -> dict:
            return {"bytes": dict(self.bytes), "calls": dict(self.calls)}

        def not_counted(self) -> list[str]:
            return sorted(self.ignored)

    return Collectives()


def _minus(a: dict, b: dict) -> dict:
    return {part: {k: a[part].get(k, 0) - b[part].get(k, 0) for k in a[part] if a[part].get(k, 0) - b[part].get(k, 0)}
            for part in a}


def worker(rank: int, workers: int, rendezvous: str, spec_json: str, out: str) -> None:
    """One of the N processes: the trial's steps under the workbench's loop, collectives counted."""
    torch.set_num_threads(1)
    device = torch.device("cpu")
    init_process_group(device, rank, workers, rendezvous)
    spec = TrialSpec.model_validate_json(spec_json)
    data = load_data(spec.data, spec.model.vocab_size, spec.seed)
    torch.manual_seed(spec.seed)
    execution = Execution.of_trial(spec.train)
    model = build_model(spec.model, execution)
    params = {"total": sum(p.numel() for p in model.parameters()),
              "blocks": sum(p.numel() for n, p in model.named_parameters() if n.startswith("blocks."))}
    place = Workers.join(spec.train, device)
    with counter() as wrap:
        model = place.wrap(model)
    marks = []
    with counter() as count:
        handle = register_optimizer_step_post_hook(lambda *_: marks.append(count.snapshot()))
        try:
            train(spec, model, data, None, None, device, execution, place)
        finally:
            handle.remove()
    if rank == 0:
        steps = [marks[0]] + [_minus(b, a) for a, b in zip(marks, marks[1:])]
        Path(out).write_text(json.dumps({"params": params, "at_wrap": wrap.snapshot(), "steps": steps,
                                         "total": count.snapshot(), "not_counted": count.not_counted()}))
    torch.distributed.destroy_process_group()


# A worker that dies by a signal is started again, with the others, this many times at most: on a
# 2-core machine where a Ray cluster was starting, a gloo worker aborted during its start-up in 1
# of 4 runs ("terminate called without an active exception", SIGABRT, within 7 s; cause not
# found); with busy loops instead of Ray beside it, 0 of 4. The count itself is not retried into
# agreement: a measurement that completes is the one reported.
ATTEMPTS = 3


def _spawn(workers: int, spec_json: str) -> dict:
    """Rank 0's counts from ``workers`` fresh processes (``worker``); see ATTEMPTS."""
    for attempt in range(1, ATTEMPTS + 1):
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "rank0.json"
            # The workers meet in a file of the fresh scratch folder, not on a port: see init_process_group.
            rendezvous = str(Path(scratch) / "rendezvous")
            try:
                mp.spawn(worker, args=(workers, rendezvous, spec_json, str(out)), nprocs=workers)
            except ProcessExitedException as e:
                if e.signal_name is None or attempt == ATTEMPTS:
                    raise
                print(f"comm_volume: {e}; starting the workers again ({attempt + 1} of {ATTEMPTS})", file=sys.stderr)
                continue
            return json.loads(out.read_text())
    raise AssertionError("unreachable")


def measure(trial: dict, parallel: str, workers: int, steps: int, context: int) -> dict:
    data = {**trial.get("data", {}), "kind": "builtin", "context": context, "max_bytes": 200_000}
    train = {**trial.get("train", {}), "batch_size": workers, "grad_accum": 1, "tokens": steps * workers * context,
             "warmup_tokens": 0, "eval_every_tokens": None, "checkpoint_every_tokens": None, "compile": False,
             "device": "cpu", "cpu_threads": 1, "workers": workers, "parallel": parallel}
    spec = validate(TrialSpec, {**trial, "data": data, "train": train}, "comm_volume")
    got = _spawn(workers, spec.model_dump_json())
    p, blocks = got["params"]["total"], got["params"]["blocks"]
    step = got["steps"][-1]["bytes"]
    if parallel == "ddp":
        formula = {"all-reduce": 4 * p}
    else:
        formula = {"all-gather": 4 * (2 * blocks + (p - blocks)), "reduce-scatter": 4 * p}
    return {"parallel": parallel, "workers": workers, "params": p, "params_blocks": blocks, "params_root": p - blocks,
            "model": {k: trial["model"][k] for k in ("vocab_size", "d_model", "n_layers", "n_heads") if k in trial["model"]},
            "step_bytes": step, "step_calls": got["steps"][-1]["calls"], "first_step_bytes": got["steps"][0]["bytes"],
            "at_wrap_bytes": got["at_wrap"]["bytes"], "not_counted": got["not_counted"], "formula_bytes": formula,
            "payload_over_formula": sum(step.get(k, 0) for k in formula) / sum(formula.values()),
            "ring_traffic_per_worker_bytes": ring_traffic(step, workers)}


def ring_traffic(step: dict, n: int) -> float:
    """Bytes each of ``n`` workers sends per step for a step's payload ``step`` (bytes by kind) under
    ring collectives; a broadcast counted whole."""
    factor = (n - 1) / n
    return (factor * (2 * step.get("all-reduce", 0) + step.get("all-gather", 0) + step.get("reduce-scatter", 0))
            + step.get("broadcast", 0))


def estimate(rows: dict[str, dict], rate: float) -> list[dict]:
    out = []
    for n, link, sequences in ESTIMATE:
        t_c = sequences * 4096 / n / rate
        row = {"gpus": n, "link": link, "bus_GBps": LINKS[link], "step_tokens": f"{sequences} x 4096",
               "compute_ms": 1e3 * t_c}
        for parallel, measured in rows.items():
            traffic = ring_traffic(measured["step_bytes"], n)
            t = traffic / (LINKS[link] * 1e9)
            row[f"{parallel}_traffic_GB"] = traffic / 1e9
            row[f"{parallel}_comm_ms"] = 1e3 * t
            row[f"{parallel}_speedup"] = [n * t_c / (t_c + t), n * t_c / max(t_c, t)]
        out.append(row)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trial", nargs="?", default=DEFAULT, help=f"trial YAML (default {DEFAULT})")
    ap.add_argument("--workers", type=int, default=2, help="processes for the trial's model (default 2)")
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps per run; the last one is the step's volume")
    ap.add_argument("--context", type=int, default=64, help="tokens per sequence (one sequence per worker)")
    ap.add_argument("--small", action="store_true", help="also two small models on 2 and 3 workers")
    ap.add_argument("--rate-from", default=RATE_FROM, help="train_throughput JSON with the trial's one-GPU tokens/s")
    ap.add_argument("--out", help="JSON file (default: benchmarks/results/<date>_<machine>_comm_volume.json)")
    args = ap.parse_args(argv)
    trial = read_yaml(common.ROOT / args.trial)
    runs = []
    for model in ([{**trial["model"], **m} for m in SMALL] if args.small else []):
        for n in (2, 3):
            for parallel in ("ddp", "fsdp"):
                runs.append({"trial": "small", **measure({**trial, "model": model}, parallel, n, args.steps, args.context)})
                print(json.dumps(runs[-1]), flush=True)
    main_rows = {}
    for parallel in ("ddp", "fsdp"):
        runs.append({"trial": args.trial, **measure(trial, parallel, args.workers, args.steps, args.context)})
        main_rows[parallel] = runs[-1]
        print(json.dumps(runs[-1]), flush=True)
    rates = json.loads((common.ROOT / args.rate_from).read_text())["mean_tokens_per_s"]
    rate = rates[args.trial] if args.trial in rates else None
    table = estimate(main_rows, rate) if rate else []
    common.write(args.out, "comm_volume", {"runs": runs, "one_gpu_tokens_per_s": rate, "rate_from": args.rate_from,
                                           "bus_GBps": LINKS, "estimate": table, "steps": args.steps,
                                           "context": args.context}, argv)
    print("\nBytes per worker per optimizer step (payload), beside the formula's; traffic: per worker, ring")
    print(f"{'model':<50} {'':>4} {'N':>2} {'P':>12} {'all-reduce':>13} {'all-gather':>13} {'reduce-scatter':>14} "
          f"{'broadcast':>9} {'x formula':>11} {'traffic':>13}")
    for r in runs:
        s = r["step_bytes"]
        name = ", ".join(f"{k} {v}" for k, v in r["model"].items())
        print(f"{name:<50} {r['parallel']:>4} {r['workers']:>2} {r['params']:>12,} {s.get('all-reduce', 0):>13,} "
              f"{s.get('all-gather', 0):>13,} {s.get('reduce-scatter', 0):>14,} {s.get('broadcast', 0):>9,} "
              f"{r['payload_over_formula']:>11.8f} {r['ring_traffic_per_worker_bytes']:>13,.0f}")
    if table:
        print(f"\nEstimate from the measured volume ({rate:,.0f} tokens/s on one GPU, {args.rate_from}):")
        print("| GPUs | link | step tokens | compute / step | DDP comm | DDP speed-up | FSDP comm | FSDP speed-up |")
        print("|---|---|---|---|---|---|---|---|")
        for e in table:
            ddp, fsdp = e["ddp_speedup"], e["fsdp_speedup"]
            print(f"| {e['gpus']} | {e['link']} | {e['step_tokens']} | {e['compute_ms']:.1f} ms | {e['ddp_comm_ms']:.1f} ms "
                  f"| {ddp[0]:.{1 if ddp[0] > 5 else 2}f}-{ddp[1]:.{1 if ddp[1] > 5 else 2}f}x | {e['fsdp_comm_ms']:.1f} ms "
                  f"| {fsdp[0]:.{1 if fsdp[0] > 5 else 2}f}-{fsdp[1]:.{1 if fsdp[1] > 5 else 2}f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
