"""A very small SVG writer for the docs figures: rectangles, text, lines. No dependencies.

Every figure is built from the project's own data (tiles.backends.*.layouts / schedule) by
docs_figures.py; this module only draws.
"""
from __future__ import annotations

import colorsys
from html import escape

FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif"

# Colours: a fixed, colour-blind-friendly-ish palette (Okabe-Ito) for categories.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999"]
NVIDIA = "#76b900"
AMD = "#ed1c24"
MEMORY = "#56B4E9"
COMPUTE = "#E69F00"
MIXED = "#CC79A7"
IDLE = "#eeeeee"


def hue(i: int, n: int, light: float = 0.55, sat: float = 0.65) -> str:
    """A distinct colour for item i of n (a hue wheel), as #rrggbb."""
    r, g, b = colorsys.hls_to_rgb((i % n) / n, light, sat)
    return "#%02x%02x%02x" % (round(r * 255), round(g * 255), round(b * 255))


def text_on(color: str) -> str:
    """Black or white text, whichever reads better on `color`."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return "#000" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"


class Svg:
    def __init__(self, width: float, height: float, title: str):
        self.w, self.h, self.title = width, height, title
        self.items: list[str] = []

    def rect(self, x, y, w, h, fill, stroke="#ffffff", sw=0.5, rx=0, title=None, opacity=None):
        t = f"<title>{escape(title)}</title>" if title else ""
        op = f' fill-opacity="{opacity}"' if opacity is not None else ""
        st = f' stroke="{stroke}" stroke-width="{sw}"' if sw else ""
        r = f' rx="{rx}"' if rx else ""
        self.items.append(f'<rect x="{x:.5g}" y="{y:.5g}" width="{w:.4g}" height="{h:.4g}"{r} fill="{fill}"{op}{st}>{t}</rect>')

    def text(self, x, y, s, size=12, anchor="start", color="#222", weight="normal", rotate=None):
        rot = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate is not None else ""
        a = f' text-anchor="{anchor}"' if anchor != "start" else ""
        wt = f' font-weight="{weight}"' if weight != "normal" else ""
        self.items.append(f'<text x="{x:.5g}" y="{y:.5g}" font-size="{size:g}"{a} fill="{color}"{wt}{rot}>{escape(str(s))}</text>')

    def line(self, x1, y1, x2, y2, color="#444", width=1, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.items.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}" '
                          f'stroke-width="{width}"{d}/>')

    def polyline(self, pts, color="#444", width=1.5):
        p = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        self.items.append(f'<polyline points="{p}" fill="none" stroke="{color}" stroke-width="{width}"/>')

    def legend(self, x, y, entries, size=11, box=12, gap=14):
        """entries: [(colour, label)], laid out left to right; returns the x after the last one."""
        for color, label in entries:
            self.rect(x, y - box + 2, box, box, color, stroke="#666", sw=0.5)
            self.text(x + box + 4, y, label, size=size)
            x += box + 8 + 0.6 * size * len(label) + gap
        return x

    def render(self) -> str:
        body = "\n".join(self.items)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w:.0f}" height="{self.h:.0f}" '
                f'viewBox="0 0 {self.w:.0f} {self.h:.0f}" role="img" style="{FONT}">\n'
                f'<title>{escape(self.title)}</title>\n'
                f'<rect x="0" y="0" width="{self.w:.0f}" height="{self.h:.0f}" fill="#ffffff"/>\n{body}\n</svg>\n')
