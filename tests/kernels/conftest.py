import os

import torch

# The Triton interpreter must be chosen before triton decorates the kernels: on a machine without
# CUDA every kernel test runs on the CPU under it.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
