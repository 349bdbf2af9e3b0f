"""Launch one fp8 GEMM a few times, for a profiler to catch: tiles.gemm_fp8, torch._scaled_mm row-wise,
or `edit:LABEL`, a variant of bench/fp8_promote_edits.py's `edits` set, or `ab:SET:LABEL`, a variant of
one of bench/fp8_ab.py's sets (`ab:stma:global`; bench on the Python path).

    ncu -k regex:gemm_fp8 --launch-skip 3 --launch-count 1 python3 bench/profile_fp8.py tiles 8192 8192 8192
"""
import sys

import torch

import tiles
from tiles.bench import fp8

impl, M, N, K = sys.argv[1], *map(int, sys.argv[2:5])
x = fp8.make_set(M, N, K, torch.device("cuda"), 0)
if impl.startswith("edit:"):
    import fp8_ab
    import fp8_promote_edits
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    fns, _ = fp8_ab.launch_all([x], {"v": fp8_promote_edits.variants(fp8_ab.global_loads(M, N, K, sms))[impl[5:]]})
elif impl.startswith("ab:"):
    import fp8_ab
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    _, which, label = impl.split(":")
    variants = {"stma": fp8_ab.stma_variants, "tiles": fp8_ab.tile_variants, "knobs": fp8_ab.knob_variants}[which]
    fns, _ = fp8_ab.launch_all([x], {"v": variants(M, N, K, sms)[label]})
for _ in range(5):
    if impl.startswith(("edit:", "ab:")):
        fns["v"](0)
    elif impl == "tiles":
        tiles.gemm_fp8(x["a"], x["b"], x["sa"], x["sb"], backend="hopper")
    else:
        torch._scaled_mm(x["a"], x["b"].t(), scale_a=x["sa_row"], scale_b=x["sb_row"], out_dtype=torch.bfloat16)
torch.cuda.synchronize()
