#!/usr/bin/env python3
"""curves.py - bench_async.sh's report: reads the progress.jsonl of each run
(label=path pairs), writes one CSV (run, step, wall_s, reward_mean,
eval_accuracy) and one SVG of reward (and held-out accuracy) against wall
time, and prints the wall-time table. Plain SVG text: no plotting library."""
import json
import sys


FIRST_ACC = {}


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if "reward_mean" in d:
                rows.append(d)
            elif d.get("eval_accuracy") is not None:
                FIRST_ACC.setdefault(path, d["eval_accuracy"])  # step 0: before training
    return rows


def main():
    out_csv, out_svg = sys.argv[1], sys.argv[2]
    runs = []
    for arg in sys.argv[3:]:
        label, path = arg.rsplit("=", 1)
        runs.append((label, load(path), path))
    with open(out_csv, "w") as f:
        f.write("run,step,wall_s,reward_mean,eval_accuracy,weight_sync_s,max_staleness\n")
        for label, rows, _ in runs:
            for d in rows:
                acc = d.get("eval_accuracy")
                f.write("%s,%d,%.3f,%.4f,%s,%.4f,%d\n" % (
                    label, d["step"], d["wall_s"], d["reward_mean"],
                    "" if acc is None else "%.4f" % acc, d.get("weight_sync_s", 0),
                    d.get("max_staleness", 0)))
    W, H, L, B = 720, 400, 60, 40
    tmax = max(d["wall_s"] for _, rows, _ in runs for d in rows) or 1
    colors = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"]
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14">reward (mean of a step, moving average of 5) '
           'vs wall time</text>' % L,
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, W - 20, H - B),
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, 30, L, H - B)]
    for k in range(6):
        y = H - B - k * (H - B - 30) / 5
        svg.append('<text x="%d" y="%.0f" font-size="11">%.1f</text>' % (L - 30, y + 4, k / 5))
        x = L + k * (W - 20 - L) / 5
        svg.append('<text x="%.0f" y="%d" font-size="11">%.0f s</text>' % (x - 10, H - B + 16,
                                                                         tmax * k / 5))
    for i, (label, rows, _) in enumerate(runs):
        pts = []
        for j, d in enumerate(rows):
            win = [r["reward_mean"] for r in rows[max(0, j - 4):j + 1]]
            r = sum(win) / len(win)
            x = L + d["wall_s"] / tmax * (W - 20 - L)
            y = H - B - r * (H - B - 30)
            pts.append("%.1f,%.1f" % (x, y))
        c = colors[i % len(colors)]
        svg.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' %
                   (c, " ".join(pts)))
        svg.append('<text x="%d" y="%d" font-size="12" fill="%s">%s</text>' %
                   (W - 200, 45 + 16 * i, c, label))
    svg.append("</svg>")
    with open(out_svg, "w") as f:
        f.write("\n".join(svg) + "\n")
    print("| run | steps | wall s | s / step | reward (last 5 steps) | accuracy first -> last "
          "| max staleness |")
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: |")
    walls = {}
    for label, rows, path in runs:
        accs = [d["eval_accuracy"] for d in rows if d.get("eval_accuracy") is not None]
        if path in FIRST_ACC:
            accs.insert(0, FIRST_ACC[path])
        wall = rows[-1]["wall_s"]
        walls[label] = wall
        last = [d["reward_mean"] for d in rows[-5:]]
        print("| %s | %d | %.1f | %.3f | %.3f | %s | %d |" % (
            label, len(rows), wall, wall / len(rows), sum(last) / len(last),
            " -> ".join("%.3f" % a for a in accs[:1] + accs[-1:]) if accs else "-",
            max(d.get("max_staleness", 0) for d in rows)))
    if len(runs) == 2:
        a, b = runs[0][0], runs[1][0]
        print("\nwall-time ratio %s / %s: %.2fx" % (b, a, walls[b] / walls[a]))


if __name__ == "__main__":
    main()
