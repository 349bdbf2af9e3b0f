"""Input checks for the public entry points. Every failure is a ValueError or TypeError that names
the argument, the value received and what is supported, raised before any work is done."""
from __future__ import annotations

import math
import numbers
import sys
from typing import Optional

import torch

ATTN_DTYPES = (torch.bfloat16, torch.float16)
GEMM_IN_DTYPES = (torch.bfloat16, torch.float16)
GEMM_OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
FP8_OUT_DTYPES = (torch.bfloat16, torch.float32)
FP8_BLOCK = 128  # elements along K (and N, for b) that share one scale
NORM_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
HEAD_DIMS = (64, 128)
ALIGN_BYTES = 16
INT32_MAX = 2**31 - 1
F32 = torch.finfo(torch.float32)  # scales and eps reach the kernels as float32


def _names(dtypes):
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


def type_name(x) -> str:
    """A value's type as a reader can tell it apart: numpy.bool, not bool."""
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def as_tensor(name: str, x) -> torch.Tensor:
    """torch tensors pass through; cupy arrays and other DLPack producers are viewed zero-copy."""
    if isinstance(x, torch.Tensor):
        return x
    if hasattr(x, "__dlpack__"):
        try:
            return torch.from_dlpack(x)
        except (BufferError, RuntimeError, TypeError, ValueError) as e:  # byte order, dtypes DLPack cannot carry
            raise TypeError(f"{name} ({type_name(x)}) cannot be viewed as a torch tensor through DLPack: {e}") from None
    raise TypeError(f"{name} must be a torch.Tensor (or a DLPack array such as cupy's), got {type_name(x)}")


def flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool (True or False), got {type_name(value)}")
    return value


def void_edges(left, right, keys: int, queries: int) -> tuple:
    """A sliding window's edges with those that exclude no key dropped (None), which also keeps them
    within 32-bit key positions: a left edge at or past the first key of the longest sequence (`keys`),
    a right edge at or past the last key of the first row (`queries` rows)."""
    return (None if left is not None and left >= keys - 1 else left,
            None if right is not None and right >= queries - 1 else right)


def window_size(value, causal: bool) -> tuple:
    """FlashAttention's window_size (left, right): ints, -1 for no edge on that side. Causal fixes the right
    edge at the diagonal, so it takes right -1 or 0. Returns (left, right) as the kernels take them: None
    where there is no edge (causal's right edge is its mask)."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in value)):
        raise TypeError(f"window_size must be a pair of ints (left, right), -1 for no edge; got {value!r}")
    left, right = value
    if left < -1 or right < -1:
        raise ValueError(f"window_size's edges are key counts >= 0, or -1 for none; got {tuple(value)}")
    if causal and right not in (-1, 0):
        raise ValueError(f"causal fixes the window's right edge at the diagonal: window_size=({left}, {right}) takes "
                         f"right -1 or 0 with causal=True (or causal=False for a right edge of {right})")
    return (None if left < 0 else left), (None if right < 0 or causal else right)


def sinks(value, heads: int, device):
    """Attention sinks: one logit a query head, a (heads,) float tensor on q's device."""
    value = as_tensor("sinks", value)
    if not value.dtype.is_floating_point or value.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"sinks must be a float32, bfloat16 or float16 tensor, got {value.dtype}")
    if tuple(value.shape) != (heads,):
        raise ValueError(f"sinks holds one logit a query head, shape ({heads},); got {tuple(value.shape)}")
    if value.device != device:
        raise ValueError(f"sinks is on {value.device}, q on {device}: pass it on q's device")
    return value


def positive_f32(name: str, value, what: str) -> float:
    """A positive finite number the kernels take as a float32 (attention's scale, layernorm's eps)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a float{what}, got {type_name(value)}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    if not F32.tiny <= value <= F32.max:
        raise ValueError(f"{name} must lie within float32's normal range [{F32.tiny:.4g}, {F32.max:.4g}] (the kernels "
                         f"compute in float32); got {value}")
    return value


def dtype(name: str, t: torch.Tensor, allowed) -> None:
    if t.dtype not in allowed:
        raise TypeError(f"{name} has dtype {str(t.dtype).replace('torch.', '')}; supported: {_names(allowed)}")


def same_dtype(names, tensors) -> None:
    ds = {t.dtype for t in tensors}
    if len(ds) > 1:
        got = ", ".join(f"{n}={str(t.dtype).replace('torch.', '')}" for n, t in zip(names, tensors))
        raise TypeError(f"{', '.join(names)} must share one dtype; got {got}")


def same_device(names, tensors) -> torch.device:
    devs = {t.device for t in tensors}
    if len(devs) > 1:
        got = ", ".join(f"{n} on {t.device}" for n, t in zip(names, tensors))
        raise ValueError(f"{', '.join(names)} must be on one device; got {got}")
    return tensors[0].device


def rank(name: str, t: torch.Tensor, r: int, layout: str) -> None:
    if t.dim() != r:
        raise ValueError(f"{name} must have {r} dimensions {layout}; got shape {tuple(t.shape)}")


def inner_stride(name: str, t: torch.Tensor) -> None:
    if t.numel() > 1 and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(
            f"{name} must have a contiguous last dimension (stride 1); got strides {tuple(t.stride())}. "
            f"Call .contiguous() on it first"
        )


def aligned(name: str, t: torch.Tensor) -> None:
    # Under torch.compile the tensors are fakes without addresses; the custom op checks again when
    # it runs on real tensors.
    if torch.compiler.is_compiling():
        return
    if t.numel() and t.data_ptr() % ALIGN_BYTES:
        raise ValueError(
            f"{name}'s data pointer must be {ALIGN_BYTES}-byte aligned; got address {t.data_ptr():#x} "
            f"(offset {t.data_ptr() % ALIGN_BYTES}). Pass a copy (.clone() starts on an aligned address; "
            f".contiguous() returns a contiguous tensor unchanged) or slice on aligned boundaries"
        )


def kmajor(b: torch.Tensor) -> bool:
    """Whether b (K, N) is stored K-contiguous with 16-byte aligned columns: a (N, K) weight seen as .t()."""
    return (b.dim() == 2 and b.shape[0] > 1 and b.stride(0) == 1 and b.stride(1) != 1
            and (b.stride(1) * b.element_size()) % ALIGN_BYTES == 0)


def stride_aligned(t: torch.Tensor) -> bool:
    return all(t.shape[i] <= 1 or (s * t.element_size()) % ALIGN_BYTES == 0 for i, s in enumerate(t.stride()[:-1]))


def strides(name: str, t: torch.Tensor) -> None:
    for i, s in enumerate(t.stride()[:-1]):
        if t.shape[i] > 1 and (s * t.element_size()) % ALIGN_BYTES:
            raise ValueError(
                f"{name}'s stride {s} on dimension {i} is not a multiple of {ALIGN_BYTES} bytes; "
                f"rows must start on {ALIGN_BYTES}-byte boundaries. Call .contiguous() on it first"
            )


def scale(value, head_dim: int) -> float:
    if value is None:
        return 1.0 / math.sqrt(head_dim)
    return positive_f32("scale", value, " or None")


def index_range(name: str, t: torch.Tensor, limit) -> None:
    """Backends that index with 32-bit offsets cannot address past `limit` elements."""
    if limit is None:
        return
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()) if n > 0)
    if t.numel() and span > limit:
        raise ValueError(
            f"{name} spans {span} elements, more than this backend's 32-bit index math allows ({limit}); "
            f"split the batch or use backend='interp'"
        )


def attention(q, k, v, causal, scale_, backend_name, paged: bool = False):
    """The checks of tiles.attention's tensors; `paged`: k and v are a pool of pages (pages, page size,
    kv_heads, head_dim), which need not share q's batch size."""
    q, k, v = as_tensor("q", q), as_tensor("k", k), as_tensor("v", v)
    flag("causal", causal)
    for n, t in (("q", q), ("k", k), ("v", v)):
        rank(n, t, 4, "(batch, seq, heads, head_dim)")
        dtype(n, t, ATTN_DTYPES)
    same_dtype(("q", "k", "v"), (q, k, v))
    device = same_device(("q", "k", "v"), (q, k, v))
    B, Sq, H, D = q.shape
    if not paged and (k.shape[0] != B or v.shape[0] != B):
        raise ValueError(f"q, k and v must share the batch size; got {B}, {k.shape[0]}, {v.shape[0]}")
    if paged and k.shape[:2] != v.shape[:2]:
        raise ValueError(f"k and v must be pools of the same pages; got k {tuple(k.shape[:2])}, v {tuple(v.shape[:2])} "
                         f"(pages, page size)")
    if D not in HEAD_DIMS:
        raise ValueError(f"q's head_dim is {D}; supported head dims: {HEAD_DIMS}")
    if k.shape[3] != D or v.shape[3] != D:
        raise ValueError(f"k and v must have q's head_dim {D}; got k {k.shape[3]}, v {v.shape[3]}")
    if k.shape[1] != v.shape[1]:
        raise ValueError(f"k and v must have the same sequence length; got k {k.shape[1]}, v {v.shape[1]}")
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"k and v must have the same number of heads; got k {k.shape[2]}, v {v.shape[2]}")
    Hkv = k.shape[2]
    if Hkv == 0 or H % Hkv:
        raise ValueError(f"the kv heads ({Hkv}) must divide the query heads ({H}) (MHA, GQA or MQA)")
    for n, t in (("q", q), ("k", k), ("v", v)):
        inner_stride(n, t)
        aligned(n, t)
        strides(n, t)
    return q, k, v, scale(scale_, D), device


def _host_may_read(name: str, t: torch.Tensor, device) -> bool:
    """Whether the host may read `t`'s values to check them: not while torch.compile traces (they are
    symbolic) or a CUDA graph is captured (a read would synchronize; the kernels clamp instead). A CPU
    tensor during a capture is refused: the graph would keep the values of the capture."""
    if "torch._dynamo" in sys.modules and torch.compiler.is_compiling():
        return False
    if device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        if t.device.type == "cpu":
            raise ValueError(f"{name} is on the CPU while a CUDA graph is captured: the graph would keep its values "
                             f"of the capture; pass it on q's device and update it in place between replays")
        return False
    return True


def to_device(t: torch.Tensor, device) -> torch.Tensor:
    """A checked tensor of counts or pages on q's device. A CPU tensor goes through pinned memory without
    waiting for the device (a plain copy from pageable memory synchronizes the stream first): counts a
    serving loop keeps on the host are checked there and cost no synchronization."""
    if t.device.type == "cpu" and device.type == "cuda":
        t = t.contiguous().pin_memory().to(device, non_blocking=True)
    return t.to(device).contiguous()


def int_tensor(name: str, t, holds: str, device) -> torch.Tensor:
    """A tensor of counts, offsets or page numbers the kernels read: int32 or int64, not requiring grad, on
    q's device or the CPU (checked on the host there, copied over by to_device)."""
    t = as_tensor(name, t)
    if t.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{name} must be an int32 or int64 tensor, got {t.dtype}")
    if t.requires_grad:
        raise ValueError(f"{name} holds {holds}: it cannot require grad")
    if t.device != device and t.device.type != "cpu":
        raise ValueError(f"{name} is on {t.device}, q on {device}: pass it on q's device (or on the CPU)")
    return t


def cache_seqlens(lens, batch: int, seq_k: int, device):
    """Each sequence's key count for attention over a cache of ragged lengths: a (batch,) tensor of
    int32 or int64 on q's device or the CPU, checked and returned as int32 where it was given
    (to_device moves it). Its values must lie in [0, seq_k]: checked on the host, which for counts on
    the device is one synchronization with it, except while a CUDA graph is captured or torch.compile
    traces, where the kernels clamp a value outside to that range."""
    lens = int_tensor("cache_seqlens", lens, "counts", device)
    if tuple(lens.shape) != (batch,):
        raise ValueError(f"cache_seqlens must have one key count per sequence, shape ({batch},); got {tuple(lens.shape)}")
    if batch and _host_may_read("cache_seqlens", lens, device):
        lo, hi = (int(x) for x in torch.aminmax(lens))
        if lo < 0 or hi > seq_k:
            raise ValueError(f"cache_seqlens must lie in [0, {seq_k}] (the keys k holds a sequence); got values from "
                             f"{lo} to {hi}")
    if lens.dtype != torch.int32:  # clamped before the narrowing, which would wrap a count past int32
        lens = lens.clamp(0, seq_k)
    return lens.to(torch.int32)


def cu_seqlens(name: str, cu, total: Optional[int], longest, longest_name: str, device, batch: Optional[int] = None):
    """Packed sequences' offsets (FlashAttention's cu_seqlens): a (batch + 1,) tensor of int32 or int64 on
    q's device or the CPU, from 0 to `total` (the packed rows; None: the running sums of a paged cache's
    key counts, which end anywhere), non-decreasing, no sequence longer than `longest` (max_seqlen, an
    int; it sizes the grid). The values are checked on the host, which for offsets on the device is one
    synchronization with it, except while a CUDA graph is captured or torch.compile traces; there the
    kernels clamp each sequence into the packed rows and to `longest`. Returns it as int32, on the host
    wherever the host read it (one copy from the device: the tables of blocks are then built there and
    reach the device through pinned memory), else where it was given (to_device moves it)."""
    cu = int_tensor(name, cu, "offsets", device)
    if cu.dim() != 1 or cu.shape[0] == 0 or batch is not None and cu.shape[0] != batch + 1:
        want = "(batch + 1,)" if batch is None else f"({batch + 1},), as cu_seqlens_q"
        raise ValueError(f"{name} must hold each sequence's first row and the end, shape {want}; got {tuple(cu.shape)}")
    if not isinstance(longest, int) or isinstance(longest, bool) or longest < 0:
        raise TypeError(f"{longest_name} must be an int >= 0 (the longest sequence's length), got {longest!r}")
    if total is not None and total >= 2 ** 31:
        raise ValueError(f"{name}: {total} packed rows reach past 2^31, the kernels' 32-bit row positions")
    if _host_may_read(name, cu, device):
        cu = cu.cpu()  # one synchronization for offsets on the device, none for the host's
        first, last = int(cu[0]), int(cu[-1])
        if total is None and first != 0:
            raise ValueError(f"{name} must start at 0 (the running sums of the sequences' key counts); got {first}")
        if total is not None and (first != 0 or last != total):
            raise ValueError(f"{name} must run from 0 to the packed rows ({total}); got {first} to {last}")
        lengths = cu[1:] - cu[:-1]
        if lengths.numel():
            lo, hi = (int(x) for x in torch.aminmax(lengths))
            if lo < 0:
                raise ValueError(f"{name} must not decrease (a sequence has {lo} rows)")
            if hi > longest:
                raise ValueError(f"{longest_name} is {longest}, but {name} holds a sequence of {hi} rows")
    if cu.dtype != torch.int32:  # clamped before the narrowing, which would wrap an offset past int32
        cu = cu.clamp(0, 2 ** 31 - 1 if total is None else total)
    return cu.to(torch.int32)


PAGE_MULTIPLE = 256  # a paged cache's page size is a multiple of every backend's key block


def block_table(table, batch: int, pages: int, page_size: int, device):
    """A paged cache's table, (batch, pages a sequence) int32 or int64 on q's device (or the CPU): entry j of
    row b is the page of the pool holding sequence b's keys [j · page_size, (j + 1) · page_size). Checks
    its form and the pool's; block_table_entries checks the entries the counts reach."""
    table = int_tensor("block_table", table, "page numbers", device)
    if table.dim() != 2 or table.shape[0] != batch or table.shape[1] == 0:
        raise ValueError(f"block_table must have a row of page numbers per sequence, shape ({batch}, pages a "
                         f"sequence); got {tuple(table.shape)}")
    if page_size % PAGE_MULTIPLE or page_size == 0:
        raise ValueError(f"a paged cache's page size (k.shape[1]) must be a multiple of {PAGE_MULTIPLE}, the key "
                         f"blocks of every backend; got {page_size}")
    if pages == 0:
        raise ValueError("k and v hold no page (k.shape[0] == 0): a paged cache's pool needs one at least")
    if table.shape[1] * page_size >= 2 ** 31:
        raise ValueError(f"block_table's {table.shape[1]} pages a sequence of {page_size} keys reach past 2^31 keys, "
                         f"the kernels' 32-bit key positions")
    return table


def block_table_entries(table, lens, pages: int, page_size: int, device):
    """The table as int32 where it was given (to_device moves it), once the entries the counts (`lens`,
    checked) reach are found to name pages of the pool: on the host (one synchronization unless table
    and counts are both on the CPU), except while a CUDA graph is captured or torch.compile traces,
    where the kernels clamp them into the pool. The rest of a row is never read."""
    if table.shape[0] and _host_may_read("block_table", table, device):
        used = (torch.arange(table.shape[1], device=table.device)[None, :] * page_size
                < lens.to(table.device)[:, None])  # the entries each count reaches
        bad = used & ((table < 0) | (table >= pages))
        if bool(bad.any()):
            b, j = (int(x) for x in bad.nonzero()[0])
            raise ValueError(f"block_table[{b}, {j}] = {int(table[b, j])} is no page of the pool (k holds {pages} "
                             f"pages); the entries a sequence's count reaches must lie in [0, {pages})")
    if table.dtype != torch.int32:  # clamped before the narrowing, which would wrap a number past int32
        table = table.clamp(-1, pages)
    return table.to(torch.int32)


def gemm(a, b, out_dtype):
    a, b = as_tensor("a", a), as_tensor("b", b)
    if a.dim() < 2:
        raise ValueError(f"a must have 2 or more dimensions (..., M, K); got shape {tuple(a.shape)}")
    if b.dim() != 2:
        raise ValueError(f"b must have 2 dimensions (K, N), one matrix for every row of a; got shape "
                         f"{tuple(b.shape)} (a batch of b matrices is not supported: loop over it, or use torch.bmm)")
    dtype("a", a, GEMM_IN_DTYPES)
    dtype("b", b, GEMM_IN_DTYPES)
    same_dtype(("a", "b"), (a, b))
    device = same_device(("a", "b"), (a, b))
    if a.shape[-1] != b.shape[0]:
        raise ValueError(f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's K ({a.shape[-1]}) must equal b's K "
                         f"({b.shape[0]})")
    if out_dtype is None:
        out_dtype = a.dtype
    if not isinstance(out_dtype, torch.dtype):
        raise TypeError(f"out_dtype must be a torch.dtype or None, got {type_name(out_dtype)}")
    if out_dtype not in GEMM_OUT_DTYPES:
        raise TypeError(f"out_dtype is {out_dtype}; supported: {_names(GEMM_OUT_DTYPES)}")
    for n, t in (("a", a), ("b", b)):  # any strides (gemm copies what a backend cannot read in place)
        aligned(n, t)
    return a, b, out_dtype, device


def layernorm(x, weight, bias, eps):
    x = as_tensor("x", x)
    weight, bias = as_tensor("weight", weight), as_tensor("bias", bias)
    if x.dim() < 1:
        raise ValueError(f"x must have at least 1 dimension, got shape {tuple(x.shape)}")
    dtype("x", x, NORM_DTYPES)
    N = x.shape[-1]
    for n, t in (("weight", weight), ("bias", bias)):
        if t.shape != (N,):
            raise ValueError(f"{n} must have shape ({N},) to match x's last dimension; got {tuple(t.shape)}")
        dtype(n, t, NORM_DTYPES)
    device = same_device(("x", "weight", "bias"), (x, weight, bias))
    eps = positive_f32("eps", eps, "")
    for n, t in (("x", x), ("weight", weight), ("bias", bias)):
        inner_stride(n, t)
    return x, weight, bias, eps, device


def rotary(x, cos, sin):
    x, cos, sin = as_tensor("x", x), as_tensor("cos", cos), as_tensor("sin", sin)
    rank("x", x, 4, "(batch, seq, heads, head_dim)")
    dtype("x", x, NORM_DTYPES)
    B, S, H, D = x.shape
    if D % 2 or D == 0:
        raise ValueError(f"x's head_dim must be even and > 0, got {D}")
    for n, t in (("cos", cos), ("sin", sin)):
        if t.shape != (S, D // 2):
            raise ValueError(f"{n} must have shape (seq, head_dim/2) = ({S}, {D // 2}); got {tuple(t.shape)}")
        dtype(n, t, NORM_DTYPES)
    device = same_device(("x", "cos", "sin"), (x, cos, sin))
    for n, t in (("x", x), ("cos", cos), ("sin", sin)):
        inner_stride(n, t)
    return x, cos, sin, device


def fp8_rowwise(a_scale, b_scale, M: int, N: int) -> bool:
    """Whether gemm_fp8's scales are row-wise (torch._scaled_mm's form: a_scale (M, 1), b_scale (1, N))
    rather than block scales. Where a shape is both (N = 1, K <= 128) the two mean the same product."""
    return tuple(a_scale.shape) == (M, 1) and tuple(b_scale.shape) == (1, N)


def fp8_block_scales(a_scale, b_scale, M: int, N: int, K: int) -> None:
    """gemm_fp8's block scales' shapes, or a ValueError naming the one that is wrong."""
    kb, nb = -(-K // FP8_BLOCK), -(-N // FP8_BLOCK)
    if tuple(a_scale.shape) == (M, 1) and tuple(b_scale.shape) != (nb, kb):
        raise ValueError(f"a_scale is ({M}, 1), row-wise: b_scale must then be (1, N) = (1, {N}), one scale per column "
                         f"of b (torch._scaled_mm's form); got {tuple(b_scale.shape)}. For (N, 1) storage pass its "
                         f"view .t() (no copy)")
    if tuple(a_scale.shape) != (M, kb):
        raise ValueError(f"a_scale must be (M, cdiv(K, {FP8_BLOCK})) = ({M}, {kb}), one scale per 1x{FP8_BLOCK} block "
                         f"of a, or ({M}, 1) with b_scale (1, {N}) for row-wise scales; got {tuple(a_scale.shape)}. "
                         f"For ({kb}, {M}) storage pass its view .t() (no copy)")
    if tuple(b_scale.shape) != (nb, kb):
        raise ValueError(f"b_scale must be (cdiv(N, {FP8_BLOCK}), cdiv(K, {FP8_BLOCK})) = ({nb}, {kb}), one scale per "
                         f"{FP8_BLOCK}x{FP8_BLOCK} block of b; got {tuple(b_scale.shape)}. For ({kb}, {nb}) storage "
                         f"pass its view .t() (no copy)")


def gemm_fp8(a, b, a_scale, b_scale, out_dtype):
    """a (M, K), b (N, K) 8-bit floats (C = a @ b^T); a_scale (M, cdiv(K, 128)) and b_scale
    (cdiv(N, 128), cdiv(K, 128)) f32 block scales, or a_scale (M, 1) and b_scale (1, N) row-wise ones.
    Any strides: a (K, M) storage is passed as its view .t()."""
    a, b = as_tensor("a", a), as_tensor("b", b)
    a_scale, b_scale = as_tensor("a_scale", a_scale), as_tensor("b_scale", b_scale)
    rank("a", a, 2, "(M, K)")
    rank("b", b, 2, "(N, K) (C = a @ b.T; a (K, N) tensor is passed as its view b.t())")
    rank("a_scale", a_scale, 2, "(M, cdiv(K, 128)) block scales or (M, 1) row-wise")
    rank("b_scale", b_scale, 2, "(cdiv(N, 128), cdiv(K, 128)) block scales or (1, N) row-wise")
    dtype("a", a, FP8_DTYPES)
    dtype("b", b, FP8_DTYPES)
    same_dtype(("a", "b"), (a, b))
    dtype("a_scale", a_scale, (torch.float32,))
    dtype("b_scale", b_scale, (torch.float32,))
    device = same_device(("a", "b", "a_scale", "b_scale"), (a, b, a_scale, b_scale))
    M, K = a.shape
    N = b.shape[0]
    if b.shape[1] != K:
        raise ValueError(f"a is {tuple(a.shape)} (M, K) and b is {tuple(b.shape)} (N, K): b's K ({b.shape[1]}) must "
                         f"equal a's ({K}). For a (K, N) tensor pass its view b.t() (no copy)")
    if not fp8_rowwise(a_scale, b_scale, M, N):
        fp8_block_scales(a_scale, b_scale, M, N, K)
    if out_dtype is None:
        out_dtype = torch.bfloat16
    if not isinstance(out_dtype, torch.dtype):
        raise TypeError(f"out_dtype must be a torch.dtype or None, got {type_name(out_dtype)}")
    if out_dtype not in FP8_OUT_DTYPES:
        raise TypeError(f"out_dtype is {out_dtype}; gemm_fp8 supports: {_names(FP8_OUT_DTYPES)}")
    return a, b, a_scale, b_scale, out_dtype, device
