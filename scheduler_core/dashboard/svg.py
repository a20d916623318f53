"""Plots drawn on the server as inline SVG: no JavaScript library, nothing fetched, nothing to build.

Pure functions from numbers to an SVG string. Every piece of text in them passes through ``html.escape`` here, so a
template may insert the result raw. Colours come from one fixed palette, in series order, so a flavour keeps its
colour from page to page within a chart's legend.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

PALETTE = ("#2f6db5", "#d9822b", "#3a9a5b", "#b5475f", "#7759b3", "#8c8c8c")
_LEFT, _RIGHT, _TOP, _BOTTOM = 66, 12, 14, 36


def _nice_top(value: float) -> float:
    """The round number (1, 2 or 5 × 10ⁿ) at or above ``value``, for the y axis."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for factor in (1, 2, 5, 10):
        if value <= factor * power:
            return float(factor * power)
    return float(10 * power)


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.2g}"


def _frame(width: int, height: int, top: float, y_label: str, x_labels: Sequence[str], title: str,
           percent: bool) -> list[str]:
    inner_w, inner_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
             f'style="max-width: {width * 1.4:.0f}px" role="img" aria-label="{html.escape(title)}" font-size="11" '
             f'font-family="system-ui, sans-serif"><title>{html.escape(title)}</title>']
    for i in range(5):
        value = top * i / 4
        y = _TOP + inner_h - inner_h * i / 4
        label = f"{value * 100:.0f}%" if percent else _number(value)
        parts.append(f'<line x1="{_LEFT}" x2="{width - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e6ea"/>'
                     f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#6b7380">'
                     f'{html.escape(label)}</text>')
    every = max(1, math.ceil(len(x_labels) / 8))
    for i, label in enumerate(x_labels):
        if i % every:
            continue
        x = _LEFT + inner_w * (i + 0.5) / max(1, len(x_labels))
        parts.append(f'<text x="{x:.1f}" y="{height - _BOTTOM + 16}" text-anchor="middle" fill="#6b7380">'
                     f'{html.escape(label)}</text>')
    parts.append(f'<text x="12" y="{_TOP + inner_h / 2:.1f}" transform="rotate(-90 12 {_TOP + inner_h / 2:.1f})" '
                 f'text-anchor="middle" fill="#3b4250">{html.escape(y_label)}</text>')
    return parts


def _legend(names: Sequence[str], width: int, height: int) -> list[str]:
    parts = []
    x = _LEFT
    for i, name in enumerate(names):
        colour = PALETTE[i % len(PALETTE)]
        parts.append(f'<rect x="{x}" y="{height - 12}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{x + 14}" y="{height - 3}" fill="#3b4250">{html.escape(name)}</text>')
        x += 24 + 7 * len(name)
        if x > width - 60:
            break
    return parts


def bar_chart(series: Mapping[str, Sequence[float]], x_labels: Sequence[str], *, y_label: str, title: str,
              width: int = 720, height: int = 220, percent: bool = False, top: float | None = None) -> str:
    """Stacked bars, one per x label, one colour per series (e.g. GPU-hours per hour, by flavour)."""
    names = list(series)
    count = len(x_labels)
    totals = [sum(series[n][i] for n in names if i < len(series[n])) for i in range(count)]
    top = top if top is not None else _nice_top(max(totals, default=0.0))
    parts = _frame(width, height, top, y_label, x_labels, title, percent)
    inner_w, inner_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    slot = inner_w / max(1, count)
    for i in range(count):
        base = 0.0
        for k, name in enumerate(names):
            value = series[name][i] if i < len(series[name]) else 0.0
            if value <= 0:
                continue
            y0 = _TOP + inner_h - inner_h * min(base, top) / top
            y1 = _TOP + inner_h - inner_h * min(base + value, top) / top
            parts.append(f'<rect x="{_LEFT + slot * i + slot * 0.12:.1f}" y="{y1:.1f}" width="{slot * 0.76:.1f}" '
                         f'height="{max(0.0, y0 - y1):.1f}" fill="{PALETTE[k % len(PALETTE)]}">'
                         f'<title>{html.escape(f"{name} {x_labels[i]}: {_number(value)}")}</title></rect>')
            base += value
    parts += _legend(names, width, height)
    parts.append("</svg>")
    return "".join(parts)


def line_chart(series: Mapping[str, Sequence[float]], x_labels: Sequence[str], *, y_label: str, title: str,
               width: int = 720, height: int = 220, percent: bool = False, top: float | None = None) -> str:
    """One line per series over the x labels (e.g. each flavour's utilisation, hour by hour)."""
    names = list(series)
    count = len(x_labels)
    peak = max((v for n in names for v in series[n]), default=0.0)
    top = top if top is not None else _nice_top(peak)
    parts = _frame(width, height, top, y_label, x_labels, title, percent)
    inner_w, inner_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    for k, name in enumerate(names):
        points = " ".join(f"{_LEFT + inner_w * (i + 0.5) / max(1, count):.1f},"
                          f"{_TOP + inner_h - inner_h * min(v, top) / top:.1f}"
                          for i, v in enumerate(series[name][:count]))
        parts.append(f'<polyline points="{points}" fill="none" stroke="{PALETTE[k % len(PALETTE)]}" '
                     f'stroke-width="2"><title>{html.escape(name)}</title></polyline>')
    parts += _legend(names, width, height)
    parts.append("</svg>")
    return "".join(parts)


def scatter_chart(points: Sequence[tuple[int, float]], best: Sequence[tuple[int, float]], *, y_label: str,
                  title: str, width: int = 720, height: int = 240) -> str:
    """Objective vs trial number: a dot per finished trial and the best-so-far as a step line."""
    if not points:
        return ""
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    low, high = min(ys), max(ys)
    if high == low:
        low, high = low - 1, high + 1
    pad = (high - low) * 0.08
    low, high = low - pad, high + pad
    span_x = max(1, max(xs))
    inner_w, inner_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM

    def at(x: float, y: float) -> tuple[float, float]:
        return _LEFT + inner_w * x / span_x, _TOP + inner_h - inner_h * (y - low) / (high - low)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
             f'style="max-width: {width * 1.4:.0f}px" role="img" aria-label="{html.escape(title)}" font-size="11" '
             f'font-family="system-ui, sans-serif"><title>{html.escape(title)}</title>']
    for i in range(5):
        value = low + (high - low) * i / 4
        _, y = at(0, value)
        parts.append(f'<line x1="{_LEFT}" x2="{width - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e6ea"/>'
                     f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#6b7380">{value:.3g}</text>')
    for i in range(0, span_x + 1, max(1, math.ceil(span_x / 8))):
        x, _ = at(i, low)
        parts.append(f'<text x="{x:.1f}" y="{height - _BOTTOM + 16}" text-anchor="middle" fill="#6b7380">{i}</text>')
    parts.append(f'<text x="{_LEFT + inner_w / 2:.1f}" y="{height - 4}" text-anchor="middle" fill="#3b4250">'
                 f'trial</text><text x="12" y="{_TOP + inner_h / 2:.1f}" '
                 f'transform="rotate(-90 12 {_TOP + inner_h / 2:.1f})" text-anchor="middle" fill="#3b4250">'
                 f'{html.escape(y_label)}</text>')
    if best:
        steps = []
        for i, (x, y) in enumerate(best):
            px, py = at(x, y)
            if i:
                steps.append(f"{px:.1f},{at(0, best[i - 1][1])[1]:.1f}")
            steps.append(f"{px:.1f},{py:.1f}")
        parts.append(f'<polyline points="{" ".join(steps)}" fill="none" stroke="{PALETTE[1]}" stroke-width="2">'
                     f'<title>best so far</title></polyline>')
    for x, y in points:
        px, py = at(x, y)
        parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{PALETTE[0]}">'
                     f'<title>{html.escape(f"trial {x}: {y:.6g}")}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)
