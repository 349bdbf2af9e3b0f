"""The built site, opened in a real browser: every figure loads with a non-zero size and no diagram
or placeholder is left as raw text.

Needs /usr/bin/chromium (Debian package `chromium`; `./dev test` installs it with the compilers when
it can). The site is built into a temporary directory, served on localhost, and a checker page on
the same origin loads each key page in an iframe and inspects its DOM; `chromium --headless
--dump-dom` prints the checker's verdict. No network beyond localhost is used.
"""
from __future__ import annotations

import functools
import html
import http.server
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and os.path.exists(p)), None)

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)"),
    pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
                       reason="mkdocs / mkdocs-material are not installed (./dev docs)"),
]

PAGES = [
    "", "getting-started/", "concepts/", "tutorials/gemm/", "tutorials/attention-forward/",
    "nvidia-vs-amd/", "nvidia-vs-amd/threads/", "nvidia-vs-amd/fragments/", "nvidia-vs-amd/async-loads/",
    "nvidia-vs-amd/overlap/", "nvidia-vs-amd/shared-memory/", "nvidia-vs-amd/chiplets/",
    "nvidia-vs-amd/registers/", "nvidia-vs-amd/attention/", "reference/language/", "benchmarks/",
]
# figures each page must show (drawn at build time by docs/hooks/docs_figures.py)
FIGURES = {
    "nvidia-vs-amd/threads/": ["threads.svg"],
    "nvidia-vs-amd/fragments/": ["fragment-same.svg", "fragment-wgmma.svg", "fragment-mfma.svg"],
    "nvidia-vs-amd/async-loads/": ["async.svg"],
    "nvidia-vs-amd/overlap/": ["overlap.svg"],
    "nvidia-vs-amd/shared-memory/": ["smem.svg", "lds-banks.svg"],
    "nvidia-vs-amd/chiplets/": ["chiplets.svg"],
    "nvidia-vs-amd/registers/": ["registers.svg"],
}

CHECKER = """<!doctype html><meta charset=utf-8><title>checker</title>
<iframe id=f style="width:1400px;height:12000px"></iframe><pre id=result>pending</pre>
<script>
const pages = %s;
const frame = document.getElementById('f');
const out = [];
function sleep(ms) { return new Promise(r => setTimeout(r, ms)); }
function load(url) { return new Promise(r => { frame.onload = r; frame.src = url; }); }
async function check(url) {
  await load(url);
  const doc = frame.contentDocument;
  for (let i = 0; i < 100; i++) {
    if ([...doc.images].every(im => im.complete)) break;
    await sleep(50);
  }
  const imgs = [...doc.images].map(im => ({src: im.getAttribute('src'), complete: im.complete,
                                           w: im.naturalWidth, h: im.naturalHeight}));
  const article = doc.querySelector('article') || doc.body;
  const svgs = [...article.querySelectorAll('svg')].filter(s => s.getClientRects().length > 0)
      .map(s => { const r = s.getBoundingClientRect(); return {w: r.width, h: r.height}; });
  const text = article.innerText;
  const raw = doc.documentElement.outerHTML;
  return {url, title: doc.title, imgs, svgs,
          rawFence: /```(mermaid|dot|svg)/.test(text), rawPlaceholder: raw.includes('<!-- tiles:') || text.includes('tiles:show'),
          textLength: text.length};
}
(async () => {
  for (const p of pages) {
    try { out.push(await check(p)); } catch (e) { out.push({url: p, error: String(e)}); }
  }
  document.getElementById('result').textContent = JSON.stringify(out);
})();
</script>
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    d = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(d)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}"
    (d / "__checker.html").write_text(CHECKER % json.dumps(["/" + p for p in PAGES]))
    handler = functools.partial(_QuietHandler, directory=str(d))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


def _chromium(url: str, tmp_path) -> str:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-extensions", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
           "--virtual-time-budget=60000", "--dump-dom", url]
    # Headless Chromium now and then stalls under virtual time and never prints the page. In session 16
    # the first try stalled in 5 of 8 runs on one machine; a fresh profile then finished in 5 s, except
    # once under the whole suite's load, where the second try stalled too. A stalled browser is retried
    # with a fresh profile, up to three tries of two minutes each; the checks are the same.
    for attempt in range(3):
        try:
            r = subprocess.run(cmd[:1] + [f"--user-data-dir={tmp_path / f'profile{attempt}'}"] + cmd[1:],
                               capture_output=True, text=True, timeout=120)
            break
        except subprocess.TimeoutExpired:
            if attempt == 2:
                raise
    assert r.returncode == 0, f"chromium failed ({r.returncode}):\n{r.stderr[-2000:]}"
    return r.stdout


def test_pages_render_figures_and_no_raw_diagrams(site, tmp_path):
    dom = _chromium(site + "/__checker.html", tmp_path)
    m = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert m, dom[-2000:]
    assert m.group(1) != "pending", "the checker did not finish within the virtual time budget"
    results = {r["url"].strip("/") + ("/" if r["url"].strip("/") else ""): r for r in json.loads(html.unescape(m.group(1)))}
    problems = []
    for page in PAGES:
        r = results.get(page)
        if r is None or "error" in r:
            problems.append(f"{page or 'index'}: {r}")
            continue
        if r["textLength"] < 200:
            problems.append(f"{page}: page text is almost empty ({r['textLength']} characters)")
        for im in r["imgs"]:
            if not im["complete"] or im["w"] <= 0 or im["h"] <= 0:
                problems.append(f"{page}: broken image {im}")
        for s in r["svgs"]:
            if s["w"] <= 0 or s["h"] <= 0:
                problems.append(f"{page}: an inline svg has no size {s}")
        if r["rawFence"]:
            problems.append(f"{page}: a diagram fence is left as raw text")
        if r["rawPlaceholder"]:
            problems.append(f"{page}: a tiles: placeholder is left in the page")
        srcs = [os.path.basename(im["src"] or "") for im in r["imgs"]]
        for fig in FIGURES.get(page, []):
            if fig not in srcs:
                problems.append(f"{page}: figure {fig} is missing (images: {srcs})")
    assert not problems, "\n".join(problems)
