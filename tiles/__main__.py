"""python -m tiles demo | info | show KERNEL --backend B [--arch A] [--split] [--emit DIR]"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

from tiles.core.lowering import LoweringError


def _examples():
    """Representative arguments for each suite kernel (bf16, head dim 128), on the meta device:
    tracing needs only dtypes and ranks."""
    bf, f32 = torch.bfloat16, torch.float32

    def t(*shape, dtype=bf):
        return torch.empty(shape, dtype=dtype, device="meta")

    B, S, H, D = 1, 1024, 16, 128
    q = t(B, S, H, D)
    lse = t(B, H, S, dtype=f32)
    return {
        "gemm": ((t(4096, 4096), t(4096, 4096), t(4096, 4096)), {}),
        "gemm_fp8": ((t(4096, 4096, dtype=torch.float8_e4m3fn), t(4096, 4096, dtype=torch.float8_e4m3fn),
                      t(4096, 32, dtype=f32), t(32, 1, 32, dtype=f32).expand(32, 128, 32), t(4096, 4096)), {}),
        "gemm_fp8_rowwise": ((t(4096, 4096, dtype=torch.float8_e4m3fn), t(4096, 4096, dtype=torch.float8_e4m3fn),
                              t(4096, 1, dtype=f32), t(1, 4096, dtype=f32), t(4096, 4096)), {}),
        "attention_fwd": ((q, q, q, q, lse, D**-0.5), {"causal": True, "D": D}),
        "attention_bwd_prep": ((q, q, lse), {"D": D}),
        "attention_bwd_dkdv": ((q, q, q, q, lse, lse, q, q, D**-0.5), {"causal": True, "D": D}),
        "attention_bwd_dq": ((q, q, q, q, lse, lse, q, D**-0.5), {"causal": True, "D": D}),
        "attention_bwd_fused": ((q, q, q, q, lse, lse, q, q, t(B, S, H, D, dtype=f32), D**-0.5),
                                {"causal": True, "D": D}),
        "layernorm": ((t(4096, 4096), t(4096), t(4096), t(4096, 4096), 1e-5), {"NP": 4096, "BM": 4}),
        "rotary": ((q, t(S, D // 2, dtype=f32), t(S, D // 2, dtype=f32), q), {"D": D}),
    }


SHOW_ALIASES = {"attention_bwd": ["attention_bwd_prep", "attention_bwd_dkdv", "attention_bwd_dq"]}
# how to build what `show --emit DIR` writes (the source includes its headers as <tiles/...>, found
# through -I DIR)
BUILD = {
    "hopper": "nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -cubin -I {dir} {src} -o {stem}.cubin",
    "cdna": ("clang++-22 -x hip --offload-arch={arch} --cuda-device-only --no-gpu-bundle-output -nogpulib -nogpuinc "
             "-O3 -std=c++17 -I {dir} -c {src} -o {stem}.co"),
    "cdna-emu": "nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -cubin -I {dir} {src} -o {stem}.cubin",
}


def _emit_dir(path: str) -> str | None:
    """Why --emit DIR cannot be written, or None."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        return f"--emit {path}: cannot make the directory ({e.strerror})"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"--emit {path}: the directory is not writable"
    return None


def cmd_show(args) -> int:
    from tiles import backends
    from tiles.kernels import SUITE

    names = SHOW_ALIASES.get(args.kernel, [args.kernel])
    for n in names:
        if n not in SUITE:
            print(f"unknown kernel {args.kernel!r}; choose one of {sorted(SUITE) + list(SHOW_ALIASES)}",
                  file=sys.stderr)
            return 2
    if args.arch and args.backend == "interp":
        print("--arch applies to the hopper, cdna and cdna-emu backends; the interpreter has none", file=sys.stderr)
        return 2
    if args.split and (names != ["attention_fwd"] or args.backend == "interp"):
        print("--split shows attention_fwd cut along its keys (hopper, cdna, cdna-emu); the interpreter runs "
              "the parts of `python -m tiles show attention_fwd` itself", file=sys.stderr)
        return 2
    if args.cache and names != ["attention_fwd"]:
        print("--cache shows attention_fwd over a KV cache of ragged lengths (ragged) or in pages (paged)",
              file=sys.stderr)
        return 2
    if args.emit and (why := _emit_dir(args.emit)):
        print(why, file=sys.stderr)
        return 2
    ex = _examples()
    for n in names:
        kfn = SUITE[n]
        a, kw = ex[n]
        if args.cache:
            a = _cache_args(a, args.cache)
        be = backends.get(args.backend)
        kw = dict(kw, **be.config(n, **kw, **({"arch": args.arch} if args.arch else {})))
        if args.backend == "interp":
            text = kfn.trace(*a, **kw).text()
            print(text)
            if args.emit:
                with open(os.path.join(args.emit, f"{n}.tir"), "w") as f:
                    f.write(text + "\n")
            continue
        lower = getattr(be, "lower", None)
        if lower is None:
            print(f"backend {args.backend!r} cannot lower kernels here: {be.available()[1]}", file=sys.stderr)
            return 2
        extra = {}
        if args.split:
            a, extra = _split_args(be, a, kw)
        try:
            lowered = lower(kfn, *a, arch=args.arch, **kw, **extra)
        except LoweringError as e:
            print(e, file=sys.stderr)
            return 2
        if args.emit:
            try:
                paths = be.emit(lowered, args.emit)
            except OSError as e:
                print(f"--emit {args.emit}: {e.strerror}: {e.filename}", file=sys.stderr)
                return 2
            print("\n".join(paths))
            src = paths[0]
            print("build: " + BUILD[args.backend.split(":")[0]].format(
                dir=args.emit, src=src, stem=os.path.splitext(src)[0], arch=args.arch or lowered.arch or "gfx942"))
        else:
            print(lowered.source)
    return 0


def _cache_args(a, cache: str):
    """attention_fwd's example arguments over a KV cache: each sequence's key count (KLen) and, paged, K and
    V as a pool of 64 pages of 256 keys with a table of 8 pages a sequence (Pages)."""
    q, k, v, o, lse, scale = a
    meta = lambda *shape, dtype=torch.int32: torch.empty(shape, dtype=dtype, device="meta")  # noqa: E731
    B = q.shape[0]
    if cache == "paged":
        k = v = meta(64, 256, k.shape[2], k.shape[3], dtype=k.dtype)
        return q, k, v, o, lse, scale, meta(B), meta(B, 8)
    return q, k, v, o, lse, scale, meta(B)


def _split_args(be, a, kw):
    """(args, lowering arguments) of `show attention_fwd --split`: the launch a short grid takes (decode),
    cut along the keys. Hopper: the schedule's options with split_tail (whole programs, then parts, and
    the merge kernel beside them; the TMA store of O and the causal pairs give way, as the launcher has
    it). CDNA: the parts kernel, whose O is the f32 workspace, and <entry>_merge into a bf16 O."""
    if be.name == "hopper":
        from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W

        opts = dict(getattr(W, "SCHEDULES", {}).get(("attention_fwd", kw.get("D"))) or {}, split_tail=True)
        opts.pop("tma_store", None)
        if kw.get("causal"):  # the causal pairs are not cut: the heavy-first walk is
            opts["window"] = False
        return a, {"options": opts}
    q, k, v, o, lse, scale, *cache = a
    return (q, k, v, torch.empty(o.shape, dtype=torch.float32, device="meta"), lse, scale, *cache), {"split": "bf16"}


def cmd_info(args) -> int:
    import tiles
    from tiles import backends

    print(f"tiles {tiles.__version__}, torch {torch.__version__}, python {sys.version.split()[0]}")
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        print(f"device: {p.name} ({getattr(p, 'gcnArchName', '') or f'sm_{p.major}{p.minor}'})")
    else:
        print("device: none (CPU only)")
    from tiles.kernels import SUITE

    for name in backends.names():
        b = backends.get(name)
        ok, why = b.available()
        print(f"  {name:7} {'present' if ok else 'absent '}  {why}")
        lowered = [k for k in SUITE if b.supports(k)]
        if lowered and name != "interp":
            print(f"          lowers: {', '.join(lowered)}")
    from tiles.core.cache import get_cache

    c = get_cache()
    print(f"kernel cache: {c.directory}" + ("" if c.enabled else " (off)") + "  (python -m tiles cache)")
    return 0


def cmd_cache(args) -> int:
    from tiles.core.cache import get_cache

    c = get_cache()
    off = "" if c.enabled else " (off: TILES_CACHE=0 or TILES_DISABLE_CACHE=1)"
    if args.clear:  # also when off: what an earlier run left there
        done = c.clear()
        print(f"kernel cache {c.directory}{off}: deleted {done['entries']} entries ({done['bytes'] / 2**20:.1f} MiB); "
              f"{done['kept']} other files left (compiles in progress, other users' entries)")
        return 0
    if not c.enabled:
        print(f"kernel cache{off}; its directory: {c.directory}")
        return 0
    info = c.summary()
    print(f"kernel cache {info['directory']}: {info['entries']} entries, {info['bytes'] / 2**20:.1f} MiB"
          + (f", {info['other']} other files (locks, temporaries, other users' entries)" if info["other"] else ""))
    return 0


def _bench(fn, reps=3):
    fn()
    times = []
    for _ in range(reps):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _decode_ref(q, k, v, dtype):
    """Causal attention aligned bottom-right (the last query row sees every key), naively in `dtype`."""
    G = q.shape[2] // k.shape[2]
    qt = q.to(dtype).transpose(1, 2)
    kt, vt = (x.to(dtype).transpose(1, 2).repeat_interleave(G, 1) for x in (k, v))
    Sq, Sk = q.shape[1], k.shape[1]
    keep = torch.ones(Sq, Sk, dtype=torch.bool, device=q.device).tril(Sk - Sq)
    s = (qt @ kt.transpose(-1, -2) * q.shape[-1] ** -0.5).masked_fill(~keep, -math.inf)
    return (torch.softmax(s, -1) @ vt).transpose(1, 2)


def cmd_demo(args) -> int:
    import tiles
    from tiles import backends

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    be = backends.for_device(device)
    print(f"tiles demo on {device} with backend '{be.name}'")
    small = be.name == "interp"
    B, S, H, Hkv, D = (1, 256, 4, 2, 64) if small else (2, 4096, 16, 16, 128)
    torch.manual_seed(0)
    q = torch.randn(B, S, H, D, dtype=torch.bfloat16, device=device)
    k = torch.randn(B, S, Hkv, D, dtype=torch.bfloat16, device=device)
    v = torch.randn(B, S, Hkv, D, dtype=torch.bfloat16, device=device)
    ok = True
    for causal in (False, True):
        out = tiles.attention(q, k, v, causal=causal)
        qt, kt, vt = (x.double().transpose(1, 2) for x in (q, k, v))
        kt, vt = kt.repeat_interleave(H // Hkv, 1), vt.repeat_interleave(H // Hkv, 1)
        ref = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)
        lp = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2).repeat_interleave(H // Hkv, 1),
            v.transpose(1, 2).repeat_interleave(H // Hkv, 1), is_causal=causal).transpose(1, 2)
        err, err_lp = (out.double() - ref).abs().max().item(), (lp.double() - ref).abs().max().item()
        t = _bench(lambda: tiles.attention(q, k, v, causal=causal), reps=1 if small else 10)
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        good = err <= 2 * err_lp + 1e-2
        ok &= good
        print(f"  attention B={B} S={S} H={H} H_kv={Hkv} D={D} causal={causal!s:5}: max|err| {err:.2e} "
              f"(torch bf16 {err_lp:.2e}) {'ok' if good else 'WRONG'}  {t * 1e3:8.2f} ms  "
              f"{flops / t / 1e12:7.2f} TFLOP/s")
    # decode: one new token a sequence against a KV cache, then four causal draft tokens (speculative decoding)
    Bd, Sk, Hd, Hkvd = (2, 300, 8, 2) if small else (8, 8192, 32, 8)
    kc, vc = (torch.randn(Bd, Sk, Hkvd, D, dtype=torch.bfloat16, device=device) for _ in range(2))
    for rows in (1, 4):
        qd = torch.randn(Bd, rows, Hd, D, dtype=torch.bfloat16, device=device)
        out = tiles.attention(qd, kc, vc, causal=True)
        err, err_lp = ((x.double() - _decode_ref(qd, kc, vc, torch.float64)).abs().max().item()
                       for x in (out, _decode_ref(qd, kc, vc, torch.bfloat16)))
        t = _bench(lambda: tiles.attention(qd, kc, vc, causal=True), reps=1 if small else 10)
        good = err <= 2 * err_lp + 1e-2
        ok &= good
        print(f"  decode B={Bd} rows={rows} S_k={Sk} H={Hd} H_kv={Hkvd} D={D} causal: max|err| {err:.2e} "
              f"(torch bf16 {err_lp:.2e}) {'ok' if good else 'WRONG'}  {t * 1e3:8.3f} ms  "
              f"{2 * kc.numel() * kc.element_size() / t / 1e12:7.2f} TB/s of cache")
    # a cache of ragged lengths: sequence b holds its first lens[b] keys (cache_seqlens, read in the kernel)
    lens = torch.linspace(Sk // 8, Sk, Bd, device=device).to(torch.int32)
    qd = torch.randn(Bd, 1, Hd, D, dtype=torch.bfloat16, device=device)
    out = tiles.attention(qd, kc, vc, causal=True, cache_seqlens=lens)
    err = err_lp = 0.0
    for b, n in enumerate(lens.tolist()):
        one = (qd[b:b + 1], kc[b:b + 1, :n], vc[b:b + 1, :n])
        ref = _decode_ref(*one, torch.float64)
        err = max(err, (out[b:b + 1].double() - ref).abs().max().item())
        err_lp = max(err_lp, (_decode_ref(*one, torch.bfloat16).double() - ref).abs().max().item())
    t = _bench(lambda: tiles.attention(qd, kc, vc, causal=True, cache_seqlens=lens), reps=1 if small else 10)
    good = err <= 2 * err_lp + 1e-2
    ok &= good
    used = 2 * int(lens.sum()) * Hkvd * D * kc.element_size()
    print(f"  decode B={Bd} rows=1 S_k={int(lens.min())}..{Sk} (cache_seqlens) H={Hd} H_kv={Hkvd} D={D}: max|err| "
          f"{err:.2e} (torch bf16 {err_lp:.2e}) {'ok' if good else 'WRONG'}  {t * 1e3:8.3f} ms  "
          f"{used / t / 1e12:7.2f} TB/s of cache")
    M = N = Kd = 256 if small else 4096
    a = torch.randn(M, Kd, dtype=torch.bfloat16, device=device)
    b = torch.randn(Kd, N, dtype=torch.bfloat16, device=device)
    c = tiles.gemm(a, b)
    ref = a.double() @ b.double()
    err, err_lp = (c.double() - ref).abs().max().item(), ((a @ b).double() - ref).abs().max().item()
    t = _bench(lambda: tiles.gemm(a, b), reps=1 if small else 10)
    good = err <= 2 * err_lp + 1e-2 * math.sqrt(Kd)
    ok &= good
    print(f"  gemm {M}x{N}x{Kd}: max|err| {err:.2e} (torch bf16 {err_lp:.2e}) {'ok' if good else 'WRONG'}  "
          f"{t * 1e3:8.2f} ms  {2 * M * N * Kd / t / 1e12:7.2f} TFLOP/s")
    if small:
        print("  (the CPU interpreter is the reference semantics, not a fast path; GPU backends are in `info`)")
    return 0 if ok else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiles", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("demo", help="attention (prefill and decode) and gemm on the best backend present, checked "
                                 "against float64")
    sub.add_parser("info", help="backends present, versions, and why the others are absent")
    s = sub.add_parser("show", help="print a suite kernel's IR or generated source")
    s.add_argument("kernel")
    s.add_argument("--backend", default="interp", choices=["interp", "hopper", "cdna", "cdna-emu"])
    s.add_argument("--arch", default=None, help="gfx942 | gfx950 for cdna and cdna-emu; sm_90a for hopper")
    s.add_argument("--split", action="store_true",
                   help="attention_fwd as a grid shorter than the GPU runs it (decode): cut along its keys, with "
                        "the kernel that merges the parts")
    s.add_argument("--cache", default=None, choices=["ragged", "paged"],
                   help="attention_fwd over a KV cache: ragged, each sequence's key count read by its programs "
                        "(cache_seqlens); paged, its keys in pages of a pool as well (block_table)")
    s.add_argument("--emit", default=None, metavar="DIR",
                   help="write a standalone translation unit to DIR: the generated source and every device header "
                        "it includes, built with -I DIR (the command is printed); for interp, the IR text")
    c = sub.add_parser("cache", help="where compiled kernels are kept, how many and how big; --clear deletes them")
    c.add_argument("--clear", action="store_true",
                   help="delete your entries and the leftovers of keys nobody is compiling (a compile in "
                        "progress still publishes its entry)")
    args = ap.parse_args(argv)
    return {"demo": cmd_demo, "info": cmd_info, "show": cmd_show, "cache": cmd_cache}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
