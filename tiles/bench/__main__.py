"""python -m tiles.bench run [--suite tiny|quick|standard|full|decode] [--kernels ...] [--out FILE]
python -m tiles.bench report FILES... --out DIR [--published FILE]"""
import argparse
import sys

from . import shapes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiles.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="time tiles and the vendor baselines on the GPU present (without a GPU: the "
                                   "tiny suite on the CPU interpreter, a check of the harness)")
    r.add_argument("--suite", default="quick", choices=list(shapes.SUITES),
                   help="decode: attention_fwd with one to sixteen query rows against 2k-128k keys of cache")
    r.add_argument("--kernels", default="gemm,attention_fwd,attention_bwd",
                   help="comma-separated: gemm, gemm_fp8, attention_fwd, attention_bwd")
    r.add_argument("--backend", default=None, help="force a tiles backend (default: best for the device)")
    r.add_argument("--out", default=None, help="result file (default bench/results/<device>-<date>.json, or the "
                                               "first of <date>b, c, ... not taken)")
    r.add_argument("--reps", type=int, default=30, help="timed launches per shape and impl, at least 1")
    r.add_argument("--budget", type=float, default=1.0, help="seconds of timing per shape and impl, at most (> 0)")
    p = sub.add_parser("report", help="side-by-side Markdown/HTML page and figures from result files")
    p.add_argument("files", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--published", default=None, help="JSON list of published numbers (always labelled)")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        from tiles import backends
        from .run import run

        kernels = tuple(k.strip() for k in args.kernels.split(",") if k.strip())
        bad = set(kernels) - {"gemm", "gemm_fp8", "attention_fwd", "attention_bwd"}
        if bad or not kernels:
            ap.error(f"--kernels: {'unknown ' + str(sorted(bad)) if bad else 'none given'}; choose from gemm, "
                     "gemm_fp8, attention_fwd, attention_bwd")
        if args.suite == "decode" and "attention_fwd" not in kernels:
            ap.error("--suite decode times attention_fwd only; add it to --kernels")
        if args.reps < 1:
            ap.error(f"--reps must be at least 1, got {args.reps}")
        if not args.budget > 0:
            ap.error(f"--budget must be a number of seconds > 0, got {args.budget}")
        if args.backend is not None:
            try:
                backends.get(args.backend)
            except ValueError as e:
                ap.error(f"--backend: {e}")
        try:
            run(args.suite, kernels, args.out, args.backend, args.reps, args.budget)
        except backends.BackendUnavailable as e:
            print(f"python -m tiles.bench run: {e}", file=sys.stderr)
            return 2
    else:
        from .report import write

        try:
            out = write(args.files, args.out, args.published)
        except (OSError, ValueError) as e:  # unreadable or malformed inputs, an --out that cannot be written
            what = f"{e.strerror}: {e.filename}" if isinstance(e, OSError) and e.strerror else str(e)
            print(f"python -m tiles.bench report: {what}", file=sys.stderr)
            return 2
        print("\n".join([out["markdown"], out["html"]] + out["figures"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
