"""What a trial costs besides its time: peak memory, and GPU telemetry sampled while it runs.

Memory is in MB (10^6 bytes, as MLflow's system metrics count it). On CUDA the allocator's peak
(``torch.cuda.max_memory_allocated``) is measured apart for training and for evaluation; on every
device the process's peak resident set (``getrusage``).

Telemetry: utilisation, memory in use and power of the GPUs the trial holds, read through NVML
(``nvidia-ml-py``) every ``period_s`` seconds on a thread of the trial's process, named as MLflow's
own system metrics (``gpu_0_utilization_percentage`` ..., logged under ``system/``) so that the
MLflow UI shows them as system metrics. Off, silently, on CPU and where NVML or a GPU is missing.
"""
from __future__ import annotations

import resource
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

PREFIX = "system/"  # MLflow's prefix for system metrics
MB = 1e6


class PeakMemory:
    """``with PeakMemory(device) as peak: ...`` then ``peak.mb``: the CUDA allocator's peak inside
    the block (MB), or None off CUDA."""

    def __init__(self, device: torch.device):
        self.device, self.mb = device, None

    def __enter__(self) -> "PeakMemory":
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.mb = torch.cuda.max_memory_allocated(self.device) / MB


def reset_peak_rss() -> bool:
    """Start the process's peak resident set afresh (Linux: writing 5 to /proc/self/clear_refs), so
    that a trial in a process that ran others before it (a reused Ray actor) reports its own peak;
    False where the system cannot (the peak then spans the process's earlier trials too)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """The process's peak resident set since it started or reset_peak_rss(), MB (Linux reports
    KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MB if sys.platform == "darwin" else peak * 1024 / MB


class NVMLSource:
    """One sample of the trial's GPUs: {f"gpu_{i}_...": value}, i counting the trial's own GPUs
    from 0 (MLflow's names: utilisation %, memory used MB and %, power W and % of the limit)."""

    def __init__(self, handles: list):
        self.handles = handles

    def __call__(self) -> dict[str, float]:
        import pynvml  # nvidia-ml-py may be absent: imported only once nvml_source found it

        out = {}
        for i, h in enumerate(self.handles):
            memory = pynvml.nvmlDeviceGetMemoryInfo(h)
            out[f"gpu_{i}_memory_usage_megabytes"] = memory.used / MB
            out[f"gpu_{i}_memory_usage_percentage"] = round(memory.used / memory.total * 100, 1)
            out[f"gpu_{i}_utilization_percentage"] = float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu)
            watts = pynvml.nvmlDeviceGetPowerUsage(h) / 1000
            out[f"gpu_{i}_power_usage_watts"] = watts
            out[f"gpu_{i}_power_usage_percentage"] = watts * 1000 / pynvml.nvmlDeviceGetEnforcedPowerLimit(h) * 100
        return out


def _nvml_handle(index: int):
    """NVML's handle of torch's CUDA device ``index``: by UUID, else by PCI bus id (NVML numbers
    every GPU of the machine, torch only those CUDA_VISIBLE_DEVICES shows, in its own order)."""
    import pynvml  # nvidia-ml-py may be absent: called only by nvml_source, which allows for that

    props = torch.cuda.get_device_properties(index)
    uuid = str(getattr(props, "uuid", "") or "")
    if uuid:
        for name in (uuid, f"GPU-{uuid}"):
            try:
                return pynvml.nvmlDeviceGetHandleByUUID(name)
            except pynvml.NVMLError:
                pass
    bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    return pynvml.nvmlDeviceGetHandleByPciBusId(bus)


def nvml_source(device: torch.device) -> NVMLSource | None:
    """The NVML source of the trial's GPU, or None (off) where there is none to read."""
    if device.type != "cuda":
        return None
    try:
        import pynvml  # nvidia-ml-py may be absent: telemetry is then off, not the module broken

        pynvml.nvmlInit()
        index = device.index if device.index is not None else torch.cuda.current_device()
        return NVMLSource([_nvml_handle(index)])
    except Exception:  # no nvidia-ml-py, no driver, an unknown device: telemetry stays off
        return None


class GPUSampler:
    """Calls ``source()`` every ``period_s`` seconds on a daemon thread, and once more when stopped
    (so every trial has its first and last sample, however short). ``take()`` hands over the
    samples since its last call ({"time_ms", "tokens", "system/<name>": value}); ``summary()``
    gives the means over every sample. ``progress()`` (tokens trained so far) stamps each sample."""

    def __init__(self, source: Callable[[], dict[str, float]], period_s: float = 5.0,
                 progress: Callable[[], int] = lambda: 0):
        self.source, self.period_s, self.progress = source, period_s, progress
        self._samples: list[dict] = []
        self._sums: dict[str, float] = {}
        self._count = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "GPUSampler":
        self._thread = threading.Thread(target=self._run, name="wb-gpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.period_s))

    def _run(self) -> None:
        self._sample()
        while not self._stop.wait(self.period_s):
            self._sample()
        self._sample()  # the last one, at the stop: a trial shorter than a period still has its end

    def _sample(self) -> None:
        try:
            values = self.source()
        except Exception:  # a failed read (NVML hiccup) skips one sample, never the trial
            return
        if values:
            sample = {"time_ms": int(time.time() * 1000), "tokens": int(self.progress())}
            sample.update((PREFIX + k, float(v)) for k, v in values.items())
            with self._lock:
                self._samples.append(sample)
                self._count += 1
                for k, v in values.items():
                    self._sums[k] = self._sums.get(k, 0.0) + float(v)

    def take(self) -> list[dict]:
        with self._lock:
            samples, self._samples = self._samples, []
        return samples

    def summary(self) -> dict:
        """Means over the samples: GPU utilisation (%) and power (W) averaged over the trial's GPUs."""
        with self._lock:
            means = {k: v / self._count for k, v in self._sums.items()} if self._count else {}
        out = {"telemetry_samples": self._count, "telemetry_period_s": self.period_s}
        for key, suffix in (("gpu_utilization_mean", "_utilization_percentage"), ("gpu_power_watts_mean", "_power_usage_watts")):
            found = [v for k, v in means.items() if k.startswith("gpu_") and k.endswith(suffix)]
            out[key] = sum(found) / len(found) if found else None
        return out


@dataclass(frozen=True)
class Telemetry:
    """How trials sample their GPUs (an execution option, never part of a spec): every ``period_s``
    seconds (None or 0: never), from ``source`` (a callable returning {MLflow metric name without
    ``system/``: value}; None: NVML of the trial's GPU, on CUDA only)."""

    period_s: float | None = 5.0
    source: Callable[[], dict[str, float]] | None = None

    def sampler(self, device: torch.device, progress: Callable[[], int] = lambda: 0) -> GPUSampler | None:
        if not self.period_s:
            return None
        source = self.source if self.source is not None else nvml_source(device)
        return GPUSampler(source, self.period_s, progress) if source is not None else None
