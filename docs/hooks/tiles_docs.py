"""mkdocs hook: pages show what tiles itself generates, at build time.

Placeholders (HTML comments, so a page read on GitHub degrades to nothing rather than to wrong code):

    <!-- tiles:show KERNEL BACKEND [arch=gfx950] [from=REGEX] [to=REGEX] [incl=1] [head=1] [collapse=1] [title=TEXT] -->
        the source `python -m tiles show KERNEL --backend BACKEND` prints (the IR for `interp`), excerpted
        from the first line matching `from` up to the next line matching `to` (`incl=1`: including it).
        `head=1`: only the comment block the generated file starts with; `collapse=1`: in a collapsed block.
        When the backend does not lower the kernel, the page shows the LoweringError text instead.
    <!-- tiles:file PATH [from=REGEX] [to=REGEX] [incl=1] [lang=python] -->
        an excerpt of a file of the repository (a kernel, a device header).
    <!-- tiles:figure NAME [caption=TEXT] -->
        an SVG drawn from the layout / schedule data (docs_figures.FIGURES), written as figures/NAME.svg.
    <!-- tiles:table NAME -->
        a Markdown table computed from the same data (docs_figures.TABLES).
    <!-- tiles:bench -->
        the benchmark report of bench/results/*.json through tiles.bench.report.

A placeholder that names nothing known, or an excerpt marker that matches no line, fails the build:
a page can never silently show stale or made-up code.
"""
from __future__ import annotations

import glob
import os
import posixpath
import re
import shlex
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _paths() -> None:
    """mkdocs restores sys.path after loading a hook; the lazy imports of tiles need the repository."""
    for p in (HERE, ROOT):
        if p not in sys.path:
            sys.path.insert(0, p)


_paths()

os.environ.setdefault("TILES_CACHE", "0")  # lowering only; never write a kernel cache from a docs build

from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.files import File  # noqa: E402

import docs_figures  # noqa: E402
from docs_lowering import excerpt, show  # noqa: E402

PLACEHOLDER = re.compile(r"^([ \t]*)<!--\s*tiles:(\w+)(.*?)-->[ \t]*$", re.M)
FIG_DIR = "figures"
BENCH_DIR = "benchmarks-figures"

_bench: dict = {}


def parse_args(text: str) -> tuple[list, dict]:
    pos, kw = [], {}
    for tok in shlex.split(text):
        if "=" in tok and not tok.startswith("="):
            k, v = tok.split("=", 1)
            kw[k] = v
        else:
            pos.append(tok)
    return pos, kw


def fence(code: str, lang: str, title: str = "") -> str:
    ticks = "```"
    while ticks in code:
        ticks += "`"
    t = f' title="{title}"' if title else ""
    return f"{ticks}{lang}{t}\n{code}\n{ticks}"


def indent(text: str, pad: str) -> str:
    return "\n".join(pad + line if line.strip() else line for line in text.splitlines())


# ----------------------------------------------------------------------------- renderers


def render_show(pos, kw, where) -> str:
    if len(pos) != 2:
        raise PluginError(f"{where}: tiles:show needs KERNEL BACKEND, got {pos}")
    kernel, backend = pos
    try:
        s = show(kernel, backend, kw.get("arch"))
    except KeyError as e:
        raise PluginError(f"{where}: {e}") from None
    if not s.ok:
        return (f'!!! failure "`{s.command}` (run while this page was built)"\n\n'
                f"{indent(fence(s.text, 'text'), '    ')}\n")
    if kw.get("head") == "1":  # the comment block every generated file starts with
        lines = s.text.splitlines()
        n = next((i for i, ln in enumerate(lines) if not ln.startswith("//")), len(lines)) or min(20, len(lines))
        code, a, b = "\n".join(lines[:n]), 1, n
    else:
        try:
            code, a, b = excerpt(s.text, kw.get("from"), kw.get("to"), kw.get("incl") == "1",
                                 what=f"{where}: {s.command}")
        except ValueError as e:
            raise PluginError(str(e)) from None
    total = len(s.text.splitlines())
    span = "all" if (a, b) == (1, total) else f"lines {a}–{b} of {total}"
    title = kw.get("title", f"{kernel} → {backend}{' ' + kw['arch'] if kw.get('arch') else ''}")
    out = (fence(code, s.lang, title) +
           f"\n\n<small>Generated while this page was built: `{s.command}` ({span}).</small>\n")
    if kw.get("collapse") == "1":
        out = f'??? example "{title}: {span} of the generated source"\n\n{indent(out, "    ")}\n'
    return out


def render_file(pos, kw, where) -> str:
    if not pos:
        raise PluginError(f"{where}: tiles:file needs a PATH")
    path = pos[0]
    full = os.path.join(ROOT, path)
    if not os.path.isfile(full):
        raise PluginError(f"{where}: tiles:file: no file {path}")
    with open(full) as f:
        text = f.read()
    try:
        code, a, b = excerpt(text, kw.get("from"), kw.get("to"), kw.get("incl") == "1",
                             what=f"{where}: {path}")
    except ValueError as e:
        raise PluginError(str(e)) from None
    lang = kw.get("lang") or {".py": "python", ".h": "cpp", ".j2": "jinja", ".md": "markdown"}.get(
        os.path.splitext(path)[1], "text")
    return fence(code, lang, kw.get("title", f"{path}")) + f"\n\n<small>From `{path}`, lines {a}–{b}.</small>\n"


def render_figure(pos, kw, where, page) -> str:
    if len(pos) != 1 or pos[0] not in docs_figures.FIGURES:
        raise PluginError(f"{where}: tiles:figure needs one of {sorted(docs_figures.FIGURES)}, got {pos}")
    name = pos[0]
    alt = docs_figures.FIGURES[name][1]
    rel = posixpath.relpath(f"{FIG_DIR}/{name}.svg", posixpath.dirname(page.file.src_uri) or ".")
    cap = kw.get("caption", "")
    out = f"[![{alt}]({rel}){{ .tiles-figure }}]({rel} \"open the figure on its own (hover its cells for details)\")"
    if cap:
        out += f"\n\n<small>{cap}</small>"
    return out + "\n"


def render_table(pos, kw, where) -> str:
    if len(pos) != 1 or pos[0] not in docs_figures.TABLES:
        raise PluginError(f"{where}: tiles:table needs one of {sorted(docs_figures.TABLES)}, got {pos}")
    return docs_figures.TABLES[pos[0]]() + "\n"


def render_bench(pos, kw, where, page) -> str:
    b = _bench
    out = []
    if pos and b["results"]:  # one kernel's rows of the side-by-side table, and its figure
        kernel = pos[0]
        lines = b["markdown"].splitlines()
        head = next((i for i, ln in enumerate(lines) if ln.startswith("| kernel |")), None)
        rows = [ln for ln in lines if ln.startswith(f"| {kernel} |")]
        if head is None or not rows:
            raise PluginError(f"{where}: tiles:bench {kernel}: no measured rows for that kernel in bench/results")
        out += [lines[head], lines[head + 1], *rows, ""]
        for f in b["figures"]:
            if os.path.basename(f) == f"{kernel}.svg":
                rel = posixpath.relpath(f"{BENCH_DIR}/{kernel}.svg", posixpath.dirname(page.file.src_uri) or ".")
                out.append(f"![{kernel}: measured TFLOP/s]({rel}){{ .tiles-figure }}\n")
        return "\n".join(out) + "\n"
    if b["results"]:
        md = b["markdown"]
        md = re.sub(r"^# .*\n", "", md, count=1)
        md = re.sub(r"^(#+) ", lambda m: "#" + m.group(1) + " ", md, flags=re.M)
        out.append(f"Measured results found: {', '.join(f'`bench/results/{os.path.basename(p)}`' for p in b['paths'])}.\n")
        out.append(md)
        for f in b["figures"]:
            rel = posixpath.relpath(f"{BENCH_DIR}/{os.path.basename(f)}", posixpath.dirname(page.file.src_uri) or ".")
            out.append(f"![{os.path.basename(f)[:-4]}: measured TFLOP/s]({rel}){{ .tiles-figure }}\n")
    else:
        out.append("!!! note \"No measured results yet\"\n"
                   "    There is no `bench/results/*.json` file in this checkout, so this page shows no measured "
                   "number. Run `python -m tiles.bench run` on a GPU to produce one; the next docs build renders it "
                   "here. (The Hopper GEMM's development measurements are logged by hand in "
                   "`bench/hopper_notes.md`; they are not in the results format and are not repeated here.)\n")
        pub = b["markdown"].split("## Published, not measured here", 1)
        if len(pub) == 2:
            out.append("### Published, not measured here\n" + pub[1].split("\nPeaks:", 1)[0])
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- mkdocs events


def _load_bench(tmp: str, root: str = ROOT) -> None:
    """Read bench/results/*.json and bench/published.json under `root` into the module's _bench."""
    from tiles.bench import report

    paths = sorted(glob.glob(os.path.join(root, "bench", "results", "*.json")))
    published_path = os.path.join(root, "bench", "published.json")
    published = report.load_published(published_path if os.path.isfile(published_path) else None)
    results = report.load(paths) if paths else []
    figs = []
    if results:
        os.makedirs(tmp, exist_ok=True)
        try:
            figs = report.figures(results, published, tmp)
        except ImportError:  # matplotlib absent: the tables still render
            figs = []
    _bench.update(paths=paths, results=results, published=published,
                  markdown=report.markdown(results, published), figures=figs)


def on_files(files, config):
    """Draw every figure (and the benchmark figures) and add them to the site as generated files."""
    _paths()
    for name, (fn, _) in docs_figures.FIGURES.items():
        files.append(File.generated(config, f"{FIG_DIR}/{name}.svg", content=fn()))
    tmp = tempfile.mkdtemp(prefix="tiles-docs-bench-")
    _load_bench(tmp)
    for f in _bench["figures"]:
        with open(f, "rb") as fh:
            files.append(File.generated(config, f"{BENCH_DIR}/{os.path.basename(f)}", content=fh.read()))
    return files


def on_page_markdown(markdown, page, config, files):
    _paths()
    where = page.file.src_uri

    def repl(m):
        pad, kind, rest = m.group(1), m.group(2), m.group(3)
        try:
            pos, kw = parse_args(rest)
        except ValueError as e:
            raise PluginError(f"{where}: bad tiles:{kind} arguments {rest!r}: {e}") from None
        if kind == "show":
            out = render_show(pos, kw, where)
        elif kind == "file":
            out = render_file(pos, kw, where)
        elif kind == "figure":
            out = render_figure(pos, kw, where, page)
        elif kind == "table":
            out = render_table(pos, kw, where)
        elif kind == "bench":
            out = render_bench(pos, kw, where, page)
        else:
            raise PluginError(f"{where}: unknown placeholder tiles:{kind}")
        return indent(out, pad) if pad else out

    out = PLACEHOLDER.sub(repl, markdown)
    # a placeholder written inline (not on its own line) would survive as raw text: refuse it
    left = re.search(r"<!--\s*tiles:", out)
    if left:
        line = out[:left.start()].count("\n") + 1
        raise PluginError(f"{where}: line {line}: a tiles: placeholder must stand alone on its line")
    return out
