"""A copy of the GPU machine's wheel folder with Ray's RLlib and LLM packages left out of its wheel,
about 2.1 MB less to carry: what lets a call carry the English set `core` (1.96 MB) beside the
wheels and the working tree inside the 64 MiB limit (experiments/claims_nl/README.md). Ray Tune and
Ray Train import neither package. Every other wheel is copied as it is; the Ray wheel's RECORD loses
the lines of the files left out. The shared wheel list lacks one dependency that every `wb` command
imports and the GPU machine does not have, ruamel.yaml (the study files' reader; pure Python, 0.1 MB):
its wheel, at the version installed here, is downloaded into the copy.

    python scripts/slim_wheels.py .gpu-wheels .gpu-wheels-claims
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

DROPPED = ("ray/rllib/", "ray/llm/")
# What `wb run` imports that neither the GPU machine nor the shared wheel list has.
MISSING_ON_GPU = ("ruamel.yaml",)


def dropped(name: str) -> bool:
    return name.startswith(DROPPED)


def slim_ray(src: Path, dst: Path) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for info in zin.infolist():
            if dropped(info.filename):
                continue
            data = zin.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                kept = [line for line in data.decode().splitlines() if not dropped(line.split(",", 1)[0])]
                data = ("\n".join(kept) + "\n").encode()
            zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    src, dst = Path(argv[0]), Path(argv[1])
    wheels = sorted(src.glob("*.whl"))
    if not wheels:
        print(f"error: no wheels in {src}: build them with ../shared/device/make-gpu-wheels {src}", file=sys.stderr)
        return 2
    dst.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        if wheel.name.startswith("ray-"):
            slim_ray(wheel, dst / wheel.name)
        else:
            shutil.copy2(wheel, dst / wheel.name)
    for name in MISSING_ON_GPU:
        pin = f"{name}=={metadata.version(name)}"
        # pure-Python wheels: any platform's is the GPU machine's (Python 3.12)
        got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                              "--python-version", "3.12", "-d", str(dst), pin], capture_output=True, text=True)
        if got.returncode != 0:
            print(f"error: could not download {pin} into {dst}: {got.stderr.strip()[-300:]}", file=sys.stderr)
            return 1
    wheels = sorted(dst.glob("*.whl"))
    before, after = (sum(w.stat().st_size for w in folder.glob("*.whl")) for folder in (src, dst))
    print(f"{dst}: {len(wheels)} wheels, {after / 1e6:.2f} MB (from {before / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
