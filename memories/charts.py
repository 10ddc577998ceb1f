"""Geometry of the statistics page's charts, drawn as inline SVG by the templates."""

from datetime import timedelta

BAR_CHART_WIDTH = 440
BAR_HEIGHT = 28
LABEL_WIDTH = 96
TIMELINE_DAYS = 30
# The timeline is drawn twice, for wide and for narrow screens (CSS shows one), so its
# text keeps a readable size instead of shrinking with the picture.
TIMELINE_SIZES = {"wide": (960, 240), "narrow": (360, 200)}


def bar_chart(counts: dict[str, int]) -> dict:
    """Geometry of a horizontal bar chart: one row per label, in the given order."""
    top = max(counts.values(), default=0) or 1
    track = BAR_CHART_WIDTH - LABEL_WIDTH - 40
    bars = []
    for row, (label, value) in enumerate(counts.items()):
        width = round(track * value / top, 1)
        bars.append({"label": label, "value": value, "y": row * BAR_HEIGHT,
                     "width": max(width, 2 if value else 0), "value_x": LABEL_WIDTH + width + 6})
    return {"bars": bars, "height": len(bars) * BAR_HEIGHT, "width": BAR_CHART_WIDTH,
            "label_width": LABEL_WIDTH, "label_x": LABEL_WIDTH - 10, "track": track}


def daily_totals(daily: dict, start, days: int, before: int) -> list[tuple]:
    """(day, memories at the end of it, added that day) for ``days`` days from ``start``."""
    running, points = before, []
    for offset in range(days):
        day = start + timedelta(days=offset)
        running += daily.get(day, 0)
        points.append((day, running, daily.get(day, 0)))
    return points


def timeline_chart(points: list[tuple], width: int, height: int) -> dict:
    """Geometry of a line chart of the daily totals, with an area under the line."""
    left, bottom, top_pad, right_pad = 40, 26, 12, 12
    plot_w, plot_h = width - left - right_pad, height - bottom - top_pad
    scale = _nice_ceiling(max((total for _day, total, _added in points), default=0))
    step = plot_w / max(len(points) - 1, 1)

    def y_of(value: int) -> float:
        return round(top_pad + plot_h - plot_h * value / scale, 1)

    coords = [(round(left + index * step, 1), y_of(total))
              for index, (_day, total, _added) in enumerate(points)]
    line = " ".join(f"{x},{y}" for x, y in coords)
    last = len(points) - 1
    return {
        "width": width, "height": height, "left": left, "right": width - right_pad,
        "line": line, "area": f"{left},{y_of(0)} {line} {coords[-1][0]},{y_of(0)}",
        "ticks": [{"y": y_of(value), "label": value} for value in (0, scale // 2, scale)],
        "labels": [{"x": coords[index][0], "label": points[index][0].strftime("%b %-d"),
                    "anchor": anchor}
                   for index, anchor in ((0, "start"), (last // 2, "middle"), (last, "end"))],
        "dots": [{"x": x, "y": y, "day": day, "total": total, "added": added}
                 for (x, y), (day, total, added) in zip(coords, points, strict=True) if added],
        "label_y": height - 6,
    }


def _nice_ceiling(value: int) -> int:
    """The smallest of 2, 4, 10, 20, 40, 100… at or above ``value`` (even, so halves are whole)."""
    ceiling = 2
    while ceiling < value:
        ceiling = ceiling * 5 // 2 if str(ceiling).startswith("4") else ceiling * 2
    return ceiling
