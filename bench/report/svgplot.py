"""Small SVG charts for bench/RESULTS.md, standard library only.

Two chart kinds: grouped bars (speedup per model) and an x-y scatter with
optional lines (planning time against tensor count, measured against
predicted time). Both axes of the scatter may be logarithmic.
"""
import math
import os
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 760, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 170, 40, 70
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f"]


def _text(x, y, s, size=12, anchor="middle", rotate=None, weight="normal"):
    transform = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate is not None else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'font-weight="{weight}" font-family="sans-serif"{transform}>{escape(str(s))}</text>')


def _header(title):
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}">',
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
            _text(WIDTH / 2, 22, title, size=15, weight="bold")]


def _legend(names):
    parts = []
    for i, name in enumerate(names):
        y = TOP + 10 + 20 * i
        x = WIDTH - RIGHT + 15
        parts.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" '
                     f'fill="{PALETTE[i % len(PALETTE)]}"/>')
        parts.append(_text(x + 18, y, name, size=12, anchor="start"))
    return parts


class _Axis:
    """Maps data values to pixels on a linear or log10 scale."""

    def __init__(self, lo, hi, pixel_lo, pixel_hi, log):
        self.log = log
        if log:
            lo, hi = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        if hi <= lo:
            hi = lo + 1
        self.lo, self.hi, self.pixel_lo, self.pixel_hi = lo, hi, pixel_lo, pixel_hi

    def __call__(self, value):
        v = math.log10(value) if self.log else value
        return self.pixel_lo + (v - self.lo) / (self.hi - self.lo) * (self.pixel_hi - self.pixel_lo)

    def ticks(self):
        if self.log:
            return [10.0 ** e for e in range(int(self.lo), int(self.hi) + 1)]
        step = _nice_step((self.hi - self.lo) / 8)
        first = math.ceil(self.lo / step) * step
        return [first + i * step for i in range(int((self.hi - first) / step + 1e-9) + 1)]


def _nice_step(raw):
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _format_tick(value):
    if value == 0:
        return "0"
    if abs(value) >= 1e4 or abs(value) < 1e-2:
        return f"{value:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{value:g}"


def grouped_bars(path, title, groups, series, values, y_label, base=0.0):
    """values[g][s] is the bar of series s in group g (None = no bar).

    Bars grow from `base` (e.g. 1.0 for speedups), drawn as a dashed line when not 0.
    """
    present = [v for row in values for v in row if v is not None]
    low, peak = min(present + [base]), max(present + [base])
    axis = _Axis(low, peak + 0.1 * (peak - low or 1.0), HEIGHT - BOTTOM, TOP, log=False)
    parts = _header(title)
    plot_w = WIDTH - LEFT - RIGHT
    group_w = plot_w / max(1, len(groups))
    bar_w = group_w * 0.8 / max(1, len(series))
    for tick in axis.ticks():
        y = axis(tick)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
                     f'stroke="#ddd"/>')
        parts.append(_text(LEFT - 6, y + 4, _format_tick(tick), size=11, anchor="end"))
    for g, group in enumerate(groups):
        x0 = LEFT + g * group_w + group_w * 0.1
        for s in range(len(series)):
            v = values[g][s]
            if v is None:
                continue
            top, bottom = sorted((axis(v), axis(base)))
            parts.append(f'<rect x="{x0 + s * bar_w:.1f}" y="{top:.1f}" width="{bar_w * 0.92:.1f}" '
                         f'height="{max(bottom - top, 0.5):.1f}" fill="{PALETTE[s % len(PALETTE)]}">'
                         f'<title>{escape(f"{group} / {series[s]}: {v:.3f}")}</title></rect>')
        parts.append(_text(LEFT + (g + 0.5) * group_w, HEIGHT - BOTTOM + 16, group, size=11))
    if base != 0.0:
        y = axis(base)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
                     f'stroke="black" stroke-dasharray="5,4"/>')
    parts.append(f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" '
                 f'y2="{HEIGHT - BOTTOM}" stroke="black"/>')
    parts.append(_text(18, (TOP + HEIGHT - BOTTOM) / 2, y_label, rotate=-90))
    parts += _legend(series)
    parts.append("</svg>")
    _write(path, parts)


def scatter(path, title, series, x_label, y_label, log_x=False, log_y=False, lines=()):
    """series: [(name, [(x, y), ...])]; lines: [(name, [(x, y), ...], dashed)] drawn as polylines."""
    points = [p for _, pts in series for p in pts] + [p for _, pts, _ in lines for p in pts]
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_axis = _Axis(min(xs) if log_x else min(0.0, min(xs)), max(xs) * (1 if log_x else 1.05),
                   LEFT, WIDTH - RIGHT, log_x)
    y_axis = _Axis(min(ys) if log_y else min(0.0, min(ys)), max(ys) * (1 if log_y else 1.05),
                   HEIGHT - BOTTOM, TOP, log_y)
    parts = _header(title)
    for tick in y_axis.ticks():
        y = y_axis(tick)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
                     f'stroke="#ddd"/>')
        parts.append(_text(LEFT - 6, y + 4, _format_tick(tick), size=11, anchor="end"))
    for tick in x_axis.ticks():
        x = x_axis(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM}" '
                     f'stroke="#eee"/>')
        parts.append(_text(x, HEIGHT - BOTTOM + 16, _format_tick(tick), size=11))
    names = [name for name, _ in series]
    for i, (name, pts) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        for x, y in pts:
            parts.append(f'<circle cx="{x_axis(x):.1f}" cy="{y_axis(y):.1f}" r="4" fill="{color}">'
                         f'<title>{escape(f"{name}: ({x:.4g}, {y:.4g})")}</title></circle>')
    for j, (name, pts, dashed) in enumerate(lines):
        color = PALETTE[(len(series) + j) % len(PALETTE)]
        coords = " ".join(f"{x_axis(x):.1f},{y_axis(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{color}" '
                     f'stroke-width="1.5"{dash}/>')
        names.append(name)
    parts.append(f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" '
                 f'height="{HEIGHT - TOP - BOTTOM}" fill="none" stroke="black"/>')
    parts.append(_text((LEFT + WIDTH - RIGHT) / 2, HEIGHT - 25, x_label))
    parts.append(_text(18, (TOP + HEIGHT - BOTTOM) / 2, y_label, rotate=-90))
    parts += _legend(names)
    parts.append("</svg>")
    _write(path, parts)


def _write(path, parts):
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        out.write("\n".join(parts) + "\n")
    os.replace(tmp, path)
