"""The tile language: tracing, trace-time errors, the IR text, and the interpreter's semantics."""

import re

import pytest
import torch

import tiles
from tiles import backends
from tiles.core import ir
from tiles.core.lang import TileError
from tiles.kernels import SUITE


def _t(*shape, dtype=torch.bfloat16):
    return torch.randn(shape).to(dtype)


@tiles.kernel
def _copy_kernel(k, X, Y, *, BM=16, BN=16):
    k.grid(k.cdiv(X.shape[0], BM), k.cdiv(X.shape[1], BN))
    r0, c0 = k.program_id(0) * BM, k.program_id(1) * BN
    s = k.shared(BM, BN, X.dtype)
    t = k.reg(BM, BN, tiles.f32)
    wait(load_async_(s, X, r0, c0))
    tiles.load(t, s)
    tiles.store(Y[:, :], t, row=r0, col=c0)


def load_async_(s, X, r0, c0):
    return tiles.load_async(s, X[:, :], row=r0, col=c0)


wait = tiles.wait


def test_copy_kernel_runs_and_clips_tails():
    x = _t(37, 21)
    y = torch.full((37, 21), float("nan"), dtype=torch.bfloat16)
    backends.get("interp").launch(_copy_kernel, x, y)
    assert torch.equal(x, y)


def test_ir_text_is_readable():
    text = SUITE["attention_fwd"].trace(_t(1, 1, 1, 64), _t(1, 1, 1, 64), _t(1, 1, 1, 64), _t(1, 1, 1, 64),
                                        _t(1, 1, 1, dtype=torch.float32), 0.1, causal=True, D=64).text()
    for needle in ("kernel attention_fwd(", "overlap PingPong(stages=2)", "shared q: st<bf16, 128x64>",
                   "for kb in pipeline(", "mma(s, q, kt, tb=True, accumulate=False)", "row_max(m_new, s, m)",
                   "mask_causal(s,", "let row0 = pid0 * 128", "store(O[pid2, :, pid1, :], o, row=row0, col=0)"):
        assert needle in text, needle


def test_every_suite_op_has_an_interpreter_handler():
    from tiles.__main__ import _examples
    from tiles.core.interp import HANDLERS

    for name, kfn in SUITE.items():
        a, kw = _examples()[name]
        for node in kfn.trace(*a, **kw).walk():
            if isinstance(node, ir.Op):
                assert node.name in HANDLERS, (name, node.name)


def _trace_error(body, *args, **kw):
    kfn = tiles.kernel(body)
    with pytest.raises(TileError) as e:
        kfn.trace(*args, **kw)
    return str(e.value)


def test_mma_shape_mismatch_names_op_and_line():
    def bad(k, A):
        k.grid(1)
        acc = k.reg(64, 64, tiles.f32)
        a = k.reg(64, 32, tiles.bf16)
        b = k.reg(16, 64, tiles.bf16)
        tiles.mma(acc, a, b)

    msg = _trace_error(bad, _t(4, 4))
    assert msg.startswith("mma: shapes do not chain") and "test_lang.py:" in msg and "tiles.mma(acc, a, b)" in msg


def test_mma_dtype_mismatch():
    def bad(k, A):
        k.grid(1)
        acc = k.reg(16, 16, tiles.f32)
        tiles.mma(acc, k.reg(16, 16, tiles.bf16), k.reg(16, 16, tiles.f16))

    assert "mma: inputs must both be bf16 or both f16" in _trace_error(bad, _t(4, 4))


def test_accumulator_must_be_f32():
    def bad(k, A):
        k.grid(1)
        acc = k.reg(16, 16, tiles.bf16)
        tiles.mma(acc, k.reg(16, 16, tiles.bf16), k.reg(16, 16, tiles.bf16))

    assert "accumulator must be f32" in _trace_error(bad, _t(4, 4))


def test_tile_too_large():
    def bad(k, A):
        k.grid(1)
        k.reg(512, 512, tiles.f32)

    assert "k.reg: tile (512, 512) has 262144 elements" in _trace_error(bad, _t(4, 4))


def test_shared_memory_budget():
    def bad(k, A):
        k.grid(1)
        for _ in range(4):
            k.shared(256, 128, tiles.f32)

    assert "shared tiles need" in _trace_error(bad, _t(4, 4))


def test_elementwise_shape_and_vector_axis_errors():
    def bad(k, A):
        k.grid(1)
        tiles.add(k.reg(16, 16, tiles.f32), k.reg(16, 32, tiles.f32), 1.0)

    assert "add: shape mismatch" in _trace_error(bad, _t(4, 4))

    def bad2(k, A):
        k.grid(1)
        tiles.row_max(k.vec(16, axis="col"), k.reg(16, 32, tiles.f32))

    assert "row_max:" in _trace_error(bad2, _t(4, 4))


def test_unwaited_token_and_missing_grid():
    def bad(k, A):
        k.grid(1)
        tiles.load_async(k.shared(16, 16, tiles.bf16), A[:, :])

    assert "never waited on" in _trace_error(bad, _t(4, 4))

    def nogrid(k, A):
        pass

    assert "never called k.grid" in _trace_error(nogrid, _t(4, 4))


def test_window_rank_errors():
    def bad(k, A):
        k.grid(1)
        tiles.load(k.reg(16, 16, tiles.f32), A[0, :, :])

    assert "index: A has rank 2; got 3 indices" in _trace_error(bad, _t(4, 4))


def test_runtime_scalar_has_no_truth_value():
    def bad(k, A):
        k.grid(1)
        if A.shape[0] > 3:
            pass

    with pytest.raises(TypeError, match="no truth value"):
        tiles.kernel(bad).trace(_t(4, 4))


def test_read_of_unwritten_tile_poisons_output():
    @tiles.kernel
    def forgot(k, Y):
        k.grid(1)
        t = k.reg(4, 4, tiles.f32)
        tiles.store(Y[:, :], t)

    y = torch.zeros(4, 4)
    backends.get("interp").launch(forgot, y)
    assert torch.isnan(y).all()


def test_load_async_lands_only_at_wait():
    @tiles.kernel
    def early(k, X, Y):
        k.grid(1)
        s = k.shared(4, 4, tiles.f32)
        t = k.reg(4, 4, tiles.f32)
        tok = tiles.load_async(s, X[:, :])
        tiles.load(t, s)  # too early: the data has not landed
        tiles.wait(tok)
        tiles.store(Y[:, :], t)

    y = torch.zeros(4, 4)
    backends.get("interp").launch(early, torch.randn(4, 4), y)
    assert torch.isnan(y).all()


def test_patterns_validate():
    with pytest.raises(ValueError, match="stages"):
        tiles.Pipelined(0)
    with pytest.raises(ValueError, match="consumers"):
        tiles.ProducerConsumer(stages=2, consumers=5)
    assert tiles.PingPong(2).describe() == "PingPong(stages=2)"


def test_scalar_exprs():
    e = ir.cdiv(ir.Sym("n", "dim") + 3, 4) * 2
    assert ir.evaluate(e, {"n": 10}) == 8
    assert ir.render(e) == "cdiv(n + 3, 4) * 2"
    assert ir.evaluate(ir.smin(ir.Sym("a", "dim"), 5) - ir.smax(1, ir.Sym("a", "dim")), {"a": 7}) == -2


def test_core_and_kernels_import_no_backend_and_name_no_vendor():
    """The layering rule: core and kernels never import a backend or a vendor package, and no
    identifier in them names a vendor (docstrings may explain how backends map a concept)."""
    import ast
    import pathlib

    root = pathlib.Path(tiles.__file__).parent
    vendors = ("hopper", "cdna", "nvidia", "amd", "cuda", "hip", "wgmma", "mfma", "cupy")
    for f in list((root / "kernels").glob("*.py")) + list((root / "core").glob("*.py")):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] + ([node.module] if getattr(node, "module", None) else [])
                for m in mods:
                    assert not m.startswith(("tiles.backends", "cuda", "hip", "cupy")), (f.name, m)
            name = getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None)
            if isinstance(name, str):
                assert not any(v in name.lower() for v in vendors), (f.name, name)
    for kfn in SUITE.values():
        assert isinstance(kfn.overlap, tiles.Pipelined.__mro__[1])


def test_torch_compile_traces_the_custom_ops():
    q = torch.randn(1, 20, 2, 64, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, 20, 2, 64, dtype=torch.bfloat16)

    def f(q, k):
        return tiles.attention(q, k, k, causal=True).float().sum() + tiles.gemm(q[0, :, 0], k[0, :, 0].T.contiguous()).float().sum()

    cf = torch.compile(f, backend="aot_eager", fullgraph=True)
    got = cf(q, k)
    assert torch.allclose(got, f(q, k))
    got.backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_runtime_scalar_compared_to_a_number_has_no_value():
    def bad(k, Y):
        k.grid(2)
        v = k.vec(1, tiles.f32)
        if k.program_id(0) == 0:  # would pick one branch for every program at trace time
            tiles.fill(v, 1.0)
        tiles.store(Y[:], v)

    with pytest.raises(TypeError, match="no truth value"):
        tiles.kernel(bad).trace(torch.zeros(2))
    p = ir.Sym("p", "pid")
    assert p == p and p != ir.Sym("q", "pid") and p in [ir.Sym("q", "pid"), p]  # identity, as the IR's lookups need


def test_integer_division_is_c_division():
    """// % and cdiv on run-time integers mean what the generated C computes: truncation toward zero
    (Python's floor differs for negative operands), cdiv as (a + b - 1) / b."""
    a, b = ir.Sym("a", "dim"), ir.Sym("b", "dim")
    for x, y in ((7, 2), (-7, 2), (7, -2), (-1, 4), (-129, 128), (0, 5)):
        env = {"a": x, "b": y}
        q = int(x / y)  # C: truncated
        assert ir.evaluate(a // b, env) == q and ir.evaluate(a % b, env) == x - y * q
        assert ir.evaluate(ir.cdiv(a, b), env) == int((x + y - 1) / y) == ir.cdiv(x, y)
    with pytest.raises(TypeError, match="integer run-time scalars"):
        ir.Sym("s", "arg", True) // 2


def test_max_and_min_skip_nan_as_fmaxf_does():
    @tiles.kernel
    def red(k, X, M, E):
        k.grid(1)
        x = k.reg(4, 4, tiles.f32)
        m = k.vec(4, tiles.f32)
        tiles.load(x, X[:, :])
        tiles.row_max(m, x)
        tiles.store(M[:], m)
        tiles.max(x, x, 0.0)
        tiles.store(E[:, :], x)

    x = torch.arange(16.0).view(4, 4) - 8
    x[0, 1] = float("nan")
    x[2] = float("nan")  # a row of NaN only: NaN
    m, e = torch.zeros(4), torch.zeros(4, 4)
    backends.get("interp").launch(red, x, m, e)
    assert m[0] == 3 - 8 and m[1] == 7 - 8 and torch.isnan(m[2]) and m[3] == 15 - 8
    assert e[0, 1] == 0 and not torch.isnan(e).any()


@pytest.mark.parametrize("case", ["float grid", "float offset", "negative index", "nan constant", "load_async dtype",
                                  "shared load offset", "wait in another loop", "wait after the loop"])
def test_trace_time_refusals(case):
    def body(k, X, Y):
        k.grid(X.shape[0] / 4 if case == "float grid" else 1)
        s = k.shared(4, 4, X.dtype)
        t = k.reg(4, 4, tiles.f32)
        if case == "float offset":
            tiles.load(t, X[:, :], row=X.shape[0] / 2)
        if case == "negative index":
            tiles.load(k.vec(4, tiles.f32), X[-1, :])
        if case == "nan constant":
            tiles.fill(t, float("nan"))
        if case == "load_async dtype":
            tiles.wait(tiles.load_async(k.shared(4, 4, tiles.f16), X[:, :]))
        if case == "shared load offset":
            tiles.wait(tiles.load_async(s, X[:, :]))
            tiles.load(t, s, row=2)
        if case == "wait in another loop":
            tok = tiles.load_async(s, X[:, :])
            for _ in k.range(3):
                tiles.wait(tok)
        if case == "wait after the loop":
            for _ in k.range(0):
                tok = tiles.load_async(s, X[:, :])
            tiles.wait(tok)
        tiles.store(Y[:, :], t)

    with pytest.raises((TileError, TypeError, ValueError)) as e:
        tiles.kernel(body).trace(torch.zeros(4, 4), torch.zeros(4, 4))
    want = {"float grid": "takes an integer", "float offset": "takes an integer", "negative index": "negative index",
            "nan constant": "NaN constant", "load_async dtype": "moves bytes", "shared load offset": "read whole",
            "wait in another loop": "issued in another loop", "wait after the loop": "issued in another loop"}[case]
    assert want in str(e.value)


def test_tile_names_stay_unique():
    def body(k, Y):
        k.grid(1)
        t = k.reg(4, 4, tiles.f32)
        t = k.reg(4, 4, tiles.f32)  # the second t becomes t1 ...
        t1 = k.reg(4, 4, tiles.f32)  # ... so this one must not
        for x in (t, t1):
            tiles.fill(x, 1.0)
        tiles.store(Y[:, :], t1)

    k = tiles.kernel(body).trace(torch.zeros(4, 4))
    names = [x.name for x in k.tiles]
    assert len(names) == len(set(names)), names


@tiles.kernel
def _named(k, X, Y, *, BM=16):
    tiles_m = k.let(k.cdiv(X.shape[0], BM))
    k.grid(tiles_m * 2)
    m, n = k.grouped(k.program_id(0), tiles_m, 2, 4)
    row0 = k.let(m * BM)
    k.let(n * 8, "col0")
    t = k.reg(BM, 8, tiles.f32)
    s = k.shared(BM, 8, X.dtype)
    tiles.wait(tiles.load_async(s, X[:, :], row=row0, col=n * 8))
    tiles.load(t, s)
    tiles.store(Y[:, :], t, row=row0, col=n * 8)


def test_let_names_expressions_in_the_text_only():
    """k.let: the IR's text declares each name once (in order, later ones in terms of earlier ones) and
    says it where the value is used; what a backend renders, and what the interpreter computes, is the
    expression itself."""
    x = _t(40, 16)
    k = _named.trace(x, x)
    text = k.text()
    lets = [line.strip() for line in text.splitlines() if line.strip().startswith("let ")]
    assert lets == ["let tiles_m = cdiv(X.shape0, 16)",
                    "let m = pid0 // 8 * 4 + pid0 % 8 % min(tiles_m - pid0 // 8 * 4, 4)",
                    "let n = pid0 % 8 // min(tiles_m - pid0 // 8 * 4, 4)",
                    "let row0 = m * 16", "let col0 = n * 8"]
    assert "grid (tiles_m * 2, 1, 1)" in text and "row=row0, col=n * 8" in text
    store = [n for n in k.body if isinstance(n, ir.Op) and n.name == "store"][0]
    plain = ir.render(store.attrs["row"])  # what the lowerings read: the expression, no names
    assert plain.endswith(") * 16") and "cdiv(X.shape0, 16)" in plain and "tiles_m" not in plain
    assert "row0" not in ir.render(store.attrs["row"], call=lambda op, a, b: f"{op}({a}, {b})")
    y = torch.zeros_like(x)
    backends.get("interp").launch(_named, x, y)
    assert torch.equal(x, y)


@pytest.mark.parametrize("body,msg", [
    (lambda k: k.let(k.program_id(0) * 2, "not a name"), "must be an identifier"),
    (lambda k: [k.let(k.program_id(0) * 2, "r"), k.let(k.program_id(0) * 3, "r")], "already names"),
    (lambda k: k.let(k.program_id(0) * 2, "X"), "already names an argument"),
    (lambda k: k.let(k.program_id(0) * 2, "BM"), "already names an argument"),
    (lambda k: k.let(k.program_id(0) * 2.5, "half"), "takes an integer"),
    (lambda k: k.let(k.program_id(0) * 2), "give the name"),
    (lambda k: k.let(k.program_id(0) * 2, "pid0"), "already names"),
    (lambda k: k.let(k.program_id(0) * 2, "t0"), "already names"),
    (lambda k: k.let(k.program_id(0) * 2, "for"), "not a keyword"),
    (lambda k: [k.let(k.program_id(0) * 2, "i"), list(k.range(2))], "also names a tile or a loop index"),
    (lambda k: k.grouped(k.program_id(0), 4, 4, 2, names=("m",)), "names must be two strings"),
])
def test_let_refusals(body, msg):
    def fn(k, X, *, BM=16):
        k.grid(1)
        body(k)
    with pytest.raises(TileError, match=msg):
        tiles.kernel(fn).trace(_t(4, 4))


def test_let_returns_numbers_and_sizes_as_they_are():
    seen = []

    def fn(k, X):
        k.grid(1)
        seen.extend([k.let(3, "three"), k.let(X.shape[0], "rows")])
    k = tiles.kernel(fn).trace(_t(4, 4))
    assert isinstance(seen[0], ir.Const) and isinstance(seen[1], ir.Sym) and k.lets == []


def test_let_and_a_later_tile_of_one_name_are_refused():
    def fn(k, X):
        k.grid(1)
        k.let(k.program_id(0) * 2, "acc")
        acc = k.reg(16, 16, tiles.f32)  # noqa: F841  (named acc: the let's name)
    with pytest.raises(TileError, match="also names a tile"):
        tiles.kernel(fn).trace(_t(4, 4))


def test_text_folds_constants_and_keeps_names():
    pid = ir.Sym("pid0", "pid")
    assert ir.render(pid * 1) == "pid0" and ir.render(pid * 1, labels=True) == "pid0"
    named = pid * 64
    named.label = "row0"
    assert ir.render((named + 0) * 1, labels=True) == "row0" and ir.render((named + 0) * 1) == "pid0 * 64"


def test_let_leaves_every_backends_code_as_it_was():
    """The suite's kernels traced as they are (with k.let) and with every name taken off lower to the
    same code on Hopper and CDNA, by their templates and op by op: only the comments (the IR's text)
    differ."""
    import re

    from tiles.__main__ import _examples
    from tiles.core.trace import KernelFn

    def code(src):
        return [re.sub(r"\s*//.*", "", line) for line in src.splitlines() if not line.lstrip().startswith("//")]

    checked = 0
    for name in ("gemm", "gemm_fp8", "attention_fwd", "attention_bwd_dq", "attention_bwd_dkdv", "attention_bwd_prep",
                 "layernorm", "rotary"):
        args, kw = _examples()[name]
        for backend in ("hopper", "cdna"):
            be = backends.get(backend)
            if not be.supports(name):
                continue
            kw_be = dict(kw, **be.config(name, **kw))
            named = be.lower(SUITE[name], *args, **kw_be).source
            fresh = KernelFn(SUITE[name].fn, SUITE[name].overlap)  # its own trace, to take the names off
            k = fresh.trace(*args, **kw_be)
            assert k.lets, name
            for e in k.lets:
                e.label = None
            k.lets.clear()
            plain = be.lower(fresh, *args, **kw_be).source
            assert named != plain and code(named) == code(plain), (name, backend)
            checked += 1
    assert checked >= 14


@tiles.kernel
def _count_rows(k, X, Y, N, *, stopped=False, BM=16):
    """Copies the first N[b] rows of X[b] into Y[b] (and 0 past them): each program reads its count, and
    masks the rows past it, or (stopped) reads them through a window that stops there."""
    k.grid(k.cdiv(X.shape[1], BM), X.shape[0])
    rb, b = k.program_id(0), k.program_id(1)
    n = k.let(k.min(k.read(N, b, bound=X.shape[1]), X.shape[1]), "n")
    t = k.reg(BM, 16, tiles.f32)
    if stopped:
        tiles.load(t, X[b, :n, :], row=rb * BM, col=0)
    else:
        tiles.load(t, X[b, :, :], row=rb * BM, col=0)
        tiles.mask_rows(t, rb * BM, n, 0.0)
    tiles.store(Y[b, :, :], t, row=rb * BM, col=0)


def test_read_gives_each_program_its_count():
    """k.read: each program reads an element of an int32 tensor; the IR says where (N[pid1]), the
    interpreter reads it at run time, and the host plans with the bound."""
    x = _t(3, 40, 16)
    y = torch.full_like(x, float("nan"))
    n = torch.tensor([40, 5, 0], dtype=torch.int32)
    backends.get("interp").launch(_count_rows, x, y, n)
    for b, c in enumerate(n.tolist()):
        assert torch.equal(y[b, :c], x[b, :c]) and torch.equal(y[b, c:], torch.zeros_like(y[b, c:]))
    kern = _count_rows.trace(x, y, n)
    assert kern.reads == [kern.params[2]] and "let n = min(N[pid1], X.shape1)" in kern.text()
    (stop,) = [o.attrs["limit"] for o in kern.walk() if isinstance(o, ir.Op) and o.name == "mask_rows"]
    assert ir.evaluate(stop, {"X.shape1": 40, "pid1": 1}) == 40  # no tensor here: the bound
    assert ir.evaluate(stop, {"X.shape1": 40, "pid1": 1, ir.read_key(kern.params[2]): n}) == 5
    with pytest.raises(IndexError, match=r"N\[pid1\] at \(3,\) is outside N of shape \(3,\)"):
        ir.evaluate(stop, {"X.shape1": 40, "pid1": 3, ir.read_key(kern.params[2]): n})


def test_read_errors_name_what_is_wrong():
    def trace(body, n=torch.zeros(2, dtype=torch.int32)):
        @tiles.kernel
        def bad(k, X, N):
            body(k, X, N)  # each body raises before the trace's end

        with pytest.raises(TileError) as e:
            bad.trace(_t(2, 4), n)
        return str(e.value)

    assert "N must be an int32 tensor, got f32" in trace(lambda k, X, N: k.read(N, 0, bound=4), torch.zeros(2))
    assert "N has 1 axes; give one index for each, got 2" in trace(lambda k, X, N: k.read(N, 0, 1, bound=4))
    assert "negative index -1 into N" in trace(lambda k, X, N: k.read(N, -1, bound=4))
    assert "bound= is a size the host knows" in trace(lambda k, X, N: k.read(N, 0, bound=k.program_id(0)))
    assert "reads an element of a tensor parameter" in trace(lambda k, X, N: k.read(3, 0, bound=4))
    assert "the grid is sized on the host" in trace(lambda k, X, N: k.grid(k.read(N, 0, bound=X.shape[0])))


def test_read_is_refused_where_a_lowering_cannot_spell_it():
    """Only the attention forward's lowerings spell k.read; a kernel that reads a tensor elsewhere (a SIMT
    kernel here) is refused on the GPU backends with the reason, not lowered wrong."""
    from tiles.backends.hopper.lower_simt import SimtLowering
    from tiles.core.lowering import LoweringError

    kern = _count_rows.trace(_t(3, 40, 16), _t(3, 40, 16), torch.zeros(3, dtype=torch.int32))
    with pytest.raises(LoweringError, match=r"reads elements of N \(k.read\), which this lowering"):
        SimtLowering(kern)


def test_a_launch_checks_what_its_programs_read():
    """check_reads (the GPU launchers call it before a launch): the read tensor is int32 on the kernel's
    device and holds the element every program reads, else a ValueError names it."""
    from tiles.core.lowering import check_reads

    x, y = _t(3, 40, 16), _t(3, 40, 16)
    for n, ok in ((torch.zeros(3, dtype=torch.int32), None), (torch.zeros(2, dtype=torch.int32), "outside N of shape (2,)"),
                  (torch.zeros(3, dtype=torch.int32, device="meta"), "an int32 tensor on cpu, got torch.int32 on meta")):
        kern = _count_rows.trace(x, y, n)
        bound = _count_rows.bind(x, y, n)
        grid = [int(ir.evaluate(g, _count_rows.runtime_env(kern, bound))) for g in kern.grid]
        tensors = {p.name: bound.arguments[p.name] for p in kern.params}
        if ok is None:
            check_reads(kern, tensors, _count_rows.runtime_env(kern, bound), grid)
        else:
            with pytest.raises(ValueError, match=re.escape(ok)):
                check_reads(kern, tensors, _count_rows.runtime_env(kern, bound), grid)


def test_a_window_stopped_short_reads_zeros_past_its_stop():
    x = _t(3, 40, 16)
    x[1, 5:] = float("nan")  # past the count: never read
    y = torch.full_like(x, 7.0)
    n = torch.tensor([40, 5, 0], dtype=torch.int32)
    backends.get("interp").launch(_count_rows, x, y, n, stopped=True)
    for b, c in enumerate(n.tolist()):
        assert torch.equal(y[b, :c], x[b, :c]) and torch.equal(y[b, c:], torch.zeros_like(y[b, c:]))
    assert "load(t, X[pid1, :n, :], row=pid0 * 16, col=0)" in _count_rows.trace(x, y, n, stopped=True).text()

    @tiles.kernel
    def writes_stopped(k, X, Y, *, add=False):
        k.grid(1)
        t = k.reg(16, 16, tiles.f32)
        tiles.load(t, X[:, :], row=0, col=0)
        (tiles.store_add if add else tiles.store)(Y[:4, :], t, row=0, col=0)

    # a store writes nothing past the stop (packed sequences: the rows after a sequence are another's)
    x, y = _t(16, 16), torch.full((16, 16), 7.0)
    backends.get("interp").launch(writes_stopped, x, y)
    assert torch.equal(y[:4], x[:4]) and torch.equal(y[4:], torch.full((12, 16), 7.0))
    with pytest.raises(TileError, match=r"Y\[:4, :\] stops an axis short .*: such a window is loaded or stored, "
                                        r"not added to"):
        writes_stopped.trace(_t(16, 16), _t(16, 16), add=True)

    @tiles.kernel
    def offset_slice(k, X):
        k.grid(1)
        tiles.load(k.reg(16, 16, tiles.f32), X[2:, :], row=0, col=0)

    with pytest.raises(TileError, match="only ':' and ':n' slices"):
        offset_slice.trace(_t(16, 16))


def test_let_of_a_loop_index_is_declared_in_the_loop():
    """k.let of a value that moves with a loop: the IR's text declares it at the top of that loop's body,
    not in the header, and says its name where it is used."""
    @tiles.kernel
    def strided(k, X, Y, *, BM=16):
        k.grid(1)
        t = k.reg(BM, 16, tiles.f32)
        for i in k.range(k.cdiv(X.shape[0], BM)):
            r = k.let(i * BM, "r")
            tiles.load(t, X[:, :], row=r, col=0)
            tiles.store(Y[:, :], t, row=r, col=0)

    x = _t(40, 16)
    y = torch.full_like(x, float("nan"))
    backends.get("interp").launch(strided, x, y)
    assert torch.equal(x, y)
    text = strided.trace(x, y).text().splitlines()
    at = next(n for n, line in enumerate(text) if line.strip().startswith("for i in range("))
    assert text[at + 1] == "    let r = i * 16" and "  let r" not in text[:at]
    assert "load(t, X[:, :], row=r, col=0)" in text[at + 2]
