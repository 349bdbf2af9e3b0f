"""The Hopper backend object the registry loads (tiles.backends: "hopper").

Lowering works anywhere (``python -m tiles show gemm --backend hopper``); compiling needs NVRTC
(cuda-python + nvidia-cuda-nvrtc); launching needs an sm_90 GPU. Each suite kernel the backend lowers
has one entry in LOWERINGS: a class with `lower()` and a `launch(lowered, bound)` classmethod.
"""
from __future__ import annotations

from typing import Optional

import torch

from tiles.core import ir
from tiles.core.backend import Backend, BackendUnavailable, LaunchCache, call_signature
from tiles import validate
from tiles.core.lowering import LoweringError

from . import gemm_probe, runtime
from .lower import ARCH, HopperLowering
from .lower_simt import LayerNormLowering, SimtLowering
from .lower_attention import WarpSpecializedLowering
from .lower_fp8 import Fp8GemmLowering


class HopperBackend(Backend):
    name = "hopper"
    include_dir = str(runtime.INCLUDE_DIR)
    source_suffix = ".cu"
    # The GEMM template's K-major B (b_kmajor): a weight passed as w.t() (x @ w.T) is read where it lies.
    # tests/hopper/test_gemm_kmajor.py passed on the H200 in session 40 (float64 bound at four shapes
    # with tails, in place without a copy, and nn.Linear's forward and backward through autograd).
    gemm_b_kmajor = True

    def __init__(self):
        self._lowered: dict = {}  # (traced kernel, options, device) -> Lowered
        self._launches = LaunchCache()  # GEMM launches by call signature (tiles.core.backend.call_signature)
        self._available = None

    def available(self):
        if self._available is None:  # asked on every call of the public API: probe once
            self._available = self._probe()
        return self._available

    def _probe(self):
        try:
            major, minor = runtime.nvrtc_version()
        except Exception as e:  # bindings or libnvrtc missing
            return False, f"NVRTC not loadable ({type(e).__name__}: {e})"
        if not torch.cuda.is_available():
            return False, f"no CUDA device (NVRTC {major}.{minor} present: lowering and compiling still work)"
        cap = torch.cuda.get_device_capability()
        if cap != (9, 0):
            return False, f"needs an sm_90 GPU (H100/H200), found compute capability {cap[0]}.{cap[1]}"
        return True, f"NVRTC {major}.{minor}, {torch.cuda.get_device_name()}"

    def serves(self, device: torch.device) -> bool:
        return (device.type == "cuda" and getattr(torch.version, "hip", None) is None
                and torch.cuda.get_device_capability(device) == (9, 0))

    max_index = None  # the templates index with 64-bit offsets where a tensor can pass 2^31 elements

    # tiles.attention's backward through attention_bwd_fused (dQ added by TMA reduce in the dK/dV pass)
    # instead of the split kernels. Off: on the H200 it ran at 0.84-1.13x the split backward's speed at
    # D = 128 after session 16's rebuild (two dS copies, the reducer warp; 0.75-1.03x before): dK and
    # dV hold 128 of a consumer's 240 registers, so S, dP and dQ cannot all be in flight, and the two
    # consumer warpgroups meet on the shared dS in every block (bench/hopper_notes.md).
    FUSED_BACKWARD = False
    # ... but at D = 64 the fused backward is the faster one: each consumer warpgroup sums its own
    # keys' share of dQ (split_k) and meets no other on dS; persistent and not rotated, 1.00-1.07x the
    # split backward non-causal at 512-16k queries and 1.02-1.12x causal at 1k-16k (session 21's
    # sweeps). At 512 causal queries the standard suite put the split kernels ahead (1.065 / 1.067x
    # cuDNN, against 1.014 / 1.014x fused), at 512 non-causal the fused one (1.004 / 1.003x against
    # 0.964 / 0.992x); shorter ones were not measured and keep the split kernels. (Head dim, causal)
    # -> the fewest queries it is taken at. Its dQ, added up by TMA reduces in whatever order the CTAs
    # reach them, is not bitwise reproducible from run to run (cuDNN's backward is not either);
    # FUSED_BACKWARD_D = {} gives the split kernels back.
    # At D = 128, with LSE and Delta loaded by TMA (vec_tma, session 22), the fused kernel runs at
    # 0.95-1.02x the split backward (whose dK/dV kernel gained the same): 1.012-1.020x non-causal at
    # 8k and 16k queries in two calls, 0.95-1.00x at 1k-4k; causal 0.97x at 8k, 0.995-1.051x at 16k
    # (four runs, 1.025x on average).
    FUSED_BACKWARD_D = {(64, False): 512, (64, True): 1024, (128, False): 8192, (128, True): 16384}
    # ... and only where its programs (a key block of 128 and a KV head each) fill the GPU twice over:
    # the split backward's dQ kernel spreads over the query blocks, the fused one does dQ's work in the
    # key blocks' programs (few keys, as in cross-attention to a short context; not measured)
    FUSED_BACKWARD_PROGRAMS_PER_SM = 2

    def _fused_chosen(self, problem: dict) -> bool:
        key = (problem.get("D", 128), bool(problem.get("causal", False)))
        if key not in self.FUSED_BACKWARD_D or problem.get("Sq", 0) < self.FUSED_BACKWARD_D[key]:
            return False
        programs = -(-problem.get("Sk", 0) // 128) * problem.get("Hkv", 1) * problem.get("B", 1)
        sms = runtime.num_sms() if torch.cuda.is_available() else 132  # the H100 / H200 SXM's, on the CPU
        return programs >= self.FUSED_BACKWARD_PROGRAMS_PER_SM * sms

    def supports(self, kernel: str, **problem) -> bool:
        if kernel == "attention_bwd_fused":
            # its dQ block is held transposed at D = 128 (D x 64 queries: D is the 128 key rows the two
            # consumer warpgroups split, lower_attention.orient); at D = 64 each warpgroup sums its own
            # keys' share of it (split_k). Lowered at any call; chosen by tiles.attention at the head
            # dims of FUSED_BACKWARD_D, at both with FUSED_BACKWARD.
            return problem.get("D", 128) in (64, 128) and (self.FUSED_BACKWARD or self._fused_chosen(problem)
                                                            or not problem)
        return kernel in LOWERINGS

    def check_fp8(self, name: str, dtype: torch.dtype, device=None) -> None:
        """Hopper's fp8 tensor cores take the OCP e4m3 format (float8_e4m3fn)."""
        if dtype != torch.float8_e4m3fn:
            raise TypeError(f"{name} has dtype {str(dtype).replace('torch.', '')}; the Hopper backend's fp8 GEMM takes "
                            f"float8_e4m3fn (OCP e4m3); float8_e4m3fnuz is AMD gfx942's format (convert with "
                            f"x.float().to(torch.float8_e4m3fn))")

    def config(self, kernel: str, **problem) -> dict:
        cls = LOWERINGS.get(kernel)
        return cls.config(kernel=kernel, **problem) if cls is not None and hasattr(cls, "config") else {}

    def _lowering(self, name: str, kernel=None):
        """The suite kernel's own lowering. A kernel of the user's without mma takes the op-by-op SIMT
        lowering (as on CDNA); one with mma is tried as a GEMM, whose recognizer says why when it is
        not one. `kernel`: the traced IR, where the name is not the suite's."""
        from tiles.kernels import SUITE

        cls = LOWERINGS.get(name)
        if cls is None and name in SUITE:
            raise LoweringError(f"hopper: kernel {name!r} has no Hopper lowering yet (lowered here: "
                                f"{sorted(LOWERINGS)}); run it with backend='interp'")
        if cls is None and kernel is not None and not any(
                isinstance(n, ir.Op) and n.name == "mma" for n in kernel.walk()):
            return SimtLowering
        return cls or HopperLowering

    def lower(self, kfn, *args, arch: Optional[str] = None, options: Optional[dict] = None, **kwargs):
        k = kfn.trace(*args, **kwargs)
        cls = self._lowering(k.name, k)
        if options is None:  # the schedule a launch would use (tiles show prints what runs)
            options = getattr(cls, "SCHEDULES", {}).get((k.name, kwargs.get("D")))
        return cls(k, arch or ARCH, **(options or {})).lower()

    def launch(self, kfn, *args, **kwargs) -> None:
        ok, why = self.available()
        if not ok:
            raise BackendUnavailable(f"backend='hopper' is not available here: {why}")
        cls = LOWERINGS.get(kfn.name)
        if cls is not None and cls is not HopperLowering:
            return cls.launch(self, kfn, *args, **kwargs)
        sig = call_signature(kfn, args, kwargs, torch.cuda.current_device())
        hit = self._launches.get(sig)  # a GEMM launched before: no trace, no routing
        if hit is not None:
            k, argv, grid, lowered = hit
            k.launch((grid,), lowered.block, argv, smem=lowered.shared_bytes)
            return
        if cls is None:  # a kernel of the user's: without mma, the SIMT lowering (which traces anyway)
            cls = self._lowering(kfn.name, kfn.trace(*args, **kwargs))
            if cls is not HopperLowering:
                return cls.launch(self, kfn, *args, **kwargs)
        bound = kfn.bind(*args, **kwargs)
        k = kfn.trace(*args, **kwargs)
        A, B, C = (bound.arguments[p.name] for p in k.params)
        if A.shape[0] == 0 or B.shape[1] == 0:
            return
        # launch-time choices the IR cannot see: the TMA-store epilogue needs C's rows 16-byte aligned;
        # a B stored K-contiguous (w.t() of an (N, K) weight) is read by the template's K-major form
        kmajor = self.gemm_b_kmajor and validate.kmajor(B)
        options = gemm_probe._fit_defaults({"b_kmajor": True} if kmajor else {}, kmajor, C)
        key = (id(k), tuple(sorted(options.items())), torch.cuda.current_device())
        lowered = self._lowered.get(key)
        if lowered is None:  # lowering renders a template: once per specialization, not per call
            lowered = self._lowered[key] = self.lower(kfn, *args, options=options, **kwargs)
        kern = lowered.notes["gemm_kernel"]
        Bk = B.t() if kmajor else B  # the template's K-major B is the (N, K) storage itself
        k, argv, grid, keep = gemm_probe.bind(kern, A, Bk, C)
        k.launch((grid,), lowered.block, argv, smem=lowered.shared_bytes)
        if keep[0] is A and keep[1] is Bk:  # no TMA-alignment copies: the maps point at the caller's tensors
            self._launches.put(sig, (k, argv, grid, lowered))


# suite kernel name -> lowering class. A lowering other than the GEMM's provides
# `launch(backend, kfn, *args, **kwargs)` as a classmethod, and optionally `config(**problem)`.
LOWERINGS = {"gemm": HopperLowering, "gemm_fp8": Fp8GemmLowering, "gemm_fp8_rowwise": Fp8GemmLowering}
# kernels without mma: the generic op-by-op lowering (lower_simt.py)
LOWERINGS.update({"layernorm": LayerNormLowering, "rotary": SimtLowering, "attention_bwd_prep": SimtLowering})
# kernels with a pipelined loop feeding wgmma: the warp-specialized op-by-op lowering (lower_attention.py);
# attention_bwd_dkdv through it with its score tiles held transposed (FlashAttention-3's swapped backward)
LOWERINGS.update({"attention_fwd": WarpSpecializedLowering, "attention_bwd_dq": WarpSpecializedLowering,
                  "attention_bwd_dkdv": WarpSpecializedLowering, "attention_bwd_fused": WarpSpecializedLowering})
