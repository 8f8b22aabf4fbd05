#!/usr/bin/env python3
"""plot_check.py SVG RUNS EVALS [log]: checks a `graphrun plot` chart.

The SVG parses as XML; it has one smoothed loss path and one raw path per
run (RUNS), at least EVALS eval paths, every path has points; the tick labels
of each axis are "nice": on a linear axis equally spaced by 1, 2 or 5 times a
power of ten, on the log loss axis (with `log`) each 1, 2 or 5 times a power
of ten; and the legend names RUNS runs.  Exits 1 with the reason otherwise.
"""
import math
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def fail(msg):
    sys.exit("plot_check: " + msg)


def mantissa_ok(v):
    m = v / 10 ** math.floor(math.log10(v) + 1e-9)
    return any(abs(m - k) < 1e-6 for k in (1, 2, 5))


def check_linear(values, what):
    if len(values) < 3:
        fail(f"{what}: only {len(values)} ticks")
    steps = {round(b - a, 9) for a, b in zip(values, values[1:])}
    if len(steps) != 1:
        fail(f"{what}: ticks {values} are not equally spaced")
    step = steps.pop()
    if step <= 0 or not mantissa_ok(step):
        fail(f"{what}: tick step {step} is not 1, 2 or 5 times a power of ten")


def ticks(panel, cls):
    return [float(t.text) for t in panel.iter(NS + "text") if t.get("class") == cls]


def main():
    svg, runs, evals = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    log = len(sys.argv) > 4 and sys.argv[4] == "log"
    root = ET.parse(svg).getroot()
    paths = [p for p in root.iter(NS + "path")]
    count = lambda c: sum(1 for p in paths if p.get("class") == c)
    if count("loss") != runs or count("raw") != runs:
        fail(f"{count('loss')} loss and {count('raw')} raw paths for {runs} runs")
    if count("eval") < evals:
        fail(f"{count('eval')} eval paths, expected at least {evals}")
    if any(not p.get("d", "").startswith("M") for p in paths):
        fail("a path without points")
    panels = [g for g in root.iter(NS + "g") if g.get("class") == "panel"]
    for i, g in enumerate(panels):
        check_linear(ticks(g, "tick-x"), f"panel {i} x")
        ys = ticks(g, "tick-y")
        if i == 0 and log:
            if len(ys) < 2 or not all(v > 0 and mantissa_ok(v) for v in ys):
                fail(f"log axis ticks {ys} are not 1, 2 or 5 times powers of ten")
        else:
            check_linear(ys, f"panel {i} y")
    names = [t.text for t in root.iter(NS + "text") if t.get("class") == "run"]
    if len(names) != runs:
        fail(f"legend names {names}, expected {runs} runs")


if __name__ == "__main__":
    main()
