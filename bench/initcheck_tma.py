"""Why initcheck flags the GEMM: the same GEMM with the TMA-store epilogue and with the register
epilogue, into an output nothing else has written. Run each under initcheck:

    compute-sanitizer --tool initcheck python3 bench/initcheck_tma.py tma    # M*N reports
    compute-sanitizer --tool initcheck python3 bench/initcheck_tma.py regs   # none

initcheck tracks writes made by threads' store instructions; elements written only by the TMA unit
(cp.async.bulk.tensor) still count as uninitialized, so torch's read of C afterwards is reported once
per element. The values are right either way (the script checks them).
"""
import sys

import torch

from tiles.backends.hopper import gemm_probe

epilogue = sys.argv[1] if len(sys.argv) > 1 else "tma"
M, N, K = 128, 256, 192
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
gemm_probe.run_gemm(a, b, out=c, epilogue=epilogue)
err = (c.double() - a.double() @ b.double()).abs().max().item()
print(f"initcheck_tma: epilogue={epilogue} M*N={M * N} max error {err:.3g}")
assert err < 0.5
