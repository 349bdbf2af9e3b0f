"""The benchmark shapes of TESTING.md: FlashAttention's convention (16k tokens per batch, hidden 2048),
GQA, and square plus LLM GEMM shapes; and the decode suite: a few query rows a sequence against a KV cache."""

SEQS = (512, 1024, 2048, 4096, 8192, 16384)
SUITES = ("tiny", "quick", "standard", "full", "decode")
# (B, H, H_kv, S, S_k, D, causal): Llama-3-8B-like heads (32 / 8) at 2k-32k of cache and batch 1-32, a
# 70B-like 64 / 8 at 128k, MHA, and D = 64, one query row a sequence (causal or not is the same then);
# and four or sixteen rows a sequence (speculative decoding), causal. Causal aligns bottom-right, as
# tiles and FlashAttention do; the SDPA baselines get the lower-right causal bias (baselines._causal).
DECODE = ((1, 32, 8, 1, 32768, 128, False), (8, 32, 8, 1, 8192, 128, False), (32, 32, 8, 1, 2048, 128, False),
          (1, 64, 8, 1, 131072, 128, False), (4, 32, 32, 1, 16384, 128, False), (1, 16, 16, 1, 16384, 64, False),
          (8, 32, 8, 4, 8192, 128, True), (4, 64, 8, 16, 16384, 128, True))


def attention_shapes(suite: str, backward: bool = False):
    if suite == "decode":  # a forward of a few rows: no decode backward to time
        return [] if backward else [dict(B=B, H=H, H_kv=Hkv, S=S, S_k=Sk, D=D, causal=causal)
                                    for B, H, Hkv, S, Sk, D, causal in DECODE]
    seqs = {"tiny": (128,), "quick": (1024, 4096), "standard": SEQS, "full": SEQS}[suite]
    dims = (64,) if suite == "tiny" else (64, 128)
    out = []
    for D in dims:
        for S in seqs:
            for causal in (False, True):
                B, H = (1, 2) if suite == "tiny" else (16384 // S, 2048 // D)
                out.append(dict(B=B, H=H, H_kv=H, S=S, S_k=S, D=D, causal=causal))
    if suite in ("standard", "full"):
        for S in (4096, 16384):
            for causal in (False, True):
                out.append(dict(B=16384 // S, H=64, H_kv=8, S=S, S_k=S, D=128, causal=causal))
    return out


def gemm_shapes(suite: str):
    if suite == "decode":
        return []
    if suite == "tiny":
        return [dict(M=128, N=128, K=128)]
    square = (4096, 8192) if suite == "quick" else (1024, 2048, 4096, 8192, 16384)
    out = [dict(M=s, N=s, K=s) for s in square]
    if suite != "quick":
        out += [dict(M=16384, N=8192, K=8192), dict(M=8192, N=8192, K=2048), dict(M=4096, N=14336, K=4096),
                dict(M=8192, N=28672, K=8192), dict(M=4096, N=4096, K=14336)]
        # x @ w.T with w stored (N, K), as nn.Linear keeps it: the layout most GEMMs in a model have
        out += [dict(M=8192, N=8192, K=8192, layout="nt"), dict(M=4096, N=14336, K=4096, layout="nt")]
    return out


def gemm_layout(s: dict) -> str:
    """"nn" (B stored K x N, the default) or "nt" (B the transpose of an N x K storage)."""
    return s.get("layout", "nn")


def attention_flops(s: dict, backward=False) -> float:
    """4·B·H·Sq·Sk·D, counting only unmasked pairs for causal; backward is 2.5x forward."""
    B, H, Sq, Sk, D = s["B"], s["H"], s["S"], s["S_k"], s["D"]
    if s["causal"]:
        pairs = sum(max(0, min(Sk, r + 1 + Sk - Sq)) for r in range(Sq)) if Sq != Sk else Sq * (Sq + 1) // 2
    else:
        pairs = Sq * Sk
    f = 4.0 * B * H * pairs * D
    return 2.5 * f if backward else f


def gemm_flops(s: dict) -> float:
    return 2.0 * s["M"] * s["N"] * s["K"]
