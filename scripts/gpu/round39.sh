#!/bin/bash
# Session 2026-11-30 (eighth): the eager backward's TMA descriptors on the autograd thread, with
# the context fix (the new GPU test) and without it (the same code, _bind_context disabled: must
# fail), then round38's timings of the 2k hd128 row.
set -u
OUT=${OUT:-/tmp/out}
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_triton_gpu.py -k fresh_process 2>&1 | tail -2
timeout 60 python3 -c "
import torch, kernels.triton_attention as ta
ta._bind_context = lambda device: None
q, k, v = (torch.randn(2, 256, 2, 64, device='cuda', dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
log_f = torch.nn.functional.logsigmoid(torch.randn(2, 256, 2, device='cuda') + 3).requires_grad_()
ta.forgetting_attention_triton(q, k, v, log_f).backward(torch.randn_like(q))
print('without the fix: backward ran')" 2>&1 | tail -2
timeout 150 python3 scripts/gpu/round38_hd128.py 2>&1 | grep -v Warn | tail -8
