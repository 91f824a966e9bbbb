#!/usr/bin/env python3
"""Joins benchmark results (format `nvfuser-bench/1`) into one report.

Reads ours (`examples/bench`: nvfuser-rs.json) and PyTorch's (`torch_baseline.py`:
torch-eager.json, torch-compile.json), joins the cases by name and writes:

  - <out>.md: one table per group (the issue's cases, then the hidden-size sweep) with our
    GB/s, eager's, torch.compile's, our ratio to each, and the percent of the measured
    device-to-device copy (ours against our copy, torch's against torch's copy);
  - <out>-sweep.png: GB/s against hidden size for softmax, LayerNorm and RMSNorm, if
    matplotlib is installed (otherwise it says so and writes only the markdown).

Usage (from the project root; every argument has this default):
    python3 scripts/bench/report.py --ours benches/results/nvfuser-rs.json \\
        --eager benches/results/torch-eager.json --compile benches/results/torch-compile.json \\
        --out benches/results/report
A missing torch file leaves its columns empty ("-").
"""

import argparse
import json
import os
import sys

FORMAT = "nvfuser-bench/1"
SWEEP_KERNELS = [("softmax", "softmax"), ("layernorm", "LayerNorm"), ("rmsnorm", "RMSNorm")]


def load(path, required):
    if not path or not os.path.exists(path):
        if required:
            sys.exit(f"report: {path} not found (run the benchmark first)")
        print(f"report: {path} not found; its columns stay empty", file=sys.stderr)
        return None
    with open(path) as f:
        r = json.load(f)
    if r.get("format") != FORMAT:
        sys.exit(f"report: {path}: expected format {FORMAT!r}, found {r.get('format')!r}")
    r["by_name"] = {c["name"]: c for c in r["cases"]}
    return r


def gbs(case):
    return case.get("gb_s") if case and case.get("status") in ("ok", "mismatch") else None


def fmt(v, spec, suffix=""):
    return "-" if v is None else format(v, spec) + suffix


def ratio(a, b):
    return a / b if a and b else None


def shape(s):
    return "[" + ", ".join(str(d) for d in s) + "]"


def header(ours, eager, compiled):
    lines = [f"# Benchmark: nvfuser-rs vs PyTorch on {ours['device']}", ""]
    for r in (ours, eager, compiled):
        if r is None:
            continue
        copy = r.get("copy")
        c = f"; copy {copy['gb_s']:.0f} GB/s" if copy else ""
        lines.append(f"- {r['implementation']}: {r['device']}, {r['date']}{c}. {r['timing']}")
    devices = {r["device"] for r in (ours, eager, compiled) if r}
    if len(devices) > 1:
        lines.append(f"- **Warning: the results come from different devices: {sorted(devices)}.**")
    lines += ["", "GB/s = logical bytes (each input and output once) / median time. `% copy`: of the "
              "device-to-device copy measured in the same run by the same implementation (ours: "
              "`cuMemcpyDtoDAsync`, torch: `copy_`). Ratios above 1 mean nvfuser-rs is faster.", ""]
    return lines


def table(cases, ours, eager, compiled):
    lines = ["| case | shape | dtype | ours GB/s | eager GB/s | compile GB/s | ours/eager | ours/compile "
             "| ours % copy | eager % copy | compile % copy | our scheduler | notes |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for c in cases:
        name = c["name"]
        e = eager["by_name"].get(name) if eager else None
        t = compiled["by_name"].get(name) if compiled else None
        o, ev, tv = gbs(c), gbs(e), gbs(t)
        notes = []
        for who, r in (("ours", c), ("eager", e), ("compile", t)):
            if r and r.get("status") != "ok":
                why = (r.get("error") or r.get("check") or "").splitlines()
                notes.append(f"{who}: {r.get('status')}" + (f" ({why[0][:80]})" if why else ""))
        lines.append(" | ".join([
            f"| {name}", shape(c["shape"]), c["dtype"], fmt(o, ".0f"), fmt(ev, ".0f"), fmt(tv, ".0f"),
            fmt(ratio(o, ev), ".2f", "x"), fmt(ratio(o, tv), ".2f", "x"),
            fmt(c.get("pct_of_copy") if o else None, ".1f"),
            fmt(e.get("pct_of_copy") if ev else None, ".1f"),
            fmt(t.get("pct_of_copy") if tv else None, ".1f"),
            c.get("scheduler") or "-", "; ".join(notes).replace("|", "\\|") or "",
        ]) + " |")
    return lines


def plot(ours, eager, compiled, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report: matplotlib is not installed; no plot (pip install matplotlib)", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), sharey=True)
    styles = [("nvfuser-rs", ours, "-", "o"), ("torch eager", eager, "--", "s"),
              ("torch.compile", compiled, ":", "^")]
    drew = False
    for ax, (kernel, title) in zip(axes, SWEEP_KERNELS):
        for label, r, ls, marker in styles:
            if r is None:
                continue
            pts = sorted((c["shape"][1], gbs(c)) for c in r["cases"]
                         if c.get("group") == "sweep" and c.get("kernel") == kernel and gbs(c))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], ls, marker=marker, label=label)
                drew = True
        if ours.get("copy"):
            ax.axhline(ours["copy"]["gb_s"], color="gray", lw=0.8, ls="-.", label="device copy (ours)")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{title} fwd, bf16, rows x hidden = 2^28")
        ax.set_xlabel("hidden size")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("GB/s (logical bytes / median time)")
    axes[0].set_ylim(bottom=0)
    axes[-1].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"{ours['device']}, {ours['date'][:10]}")
    fig.tight_layout()
    if not drew:
        print("report: no sweep results to plot", file=sys.stderr)
        plt.close(fig)
        return False
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main():
    d = "benches/results"
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ours", default=f"{d}/nvfuser-rs.json")
    p.add_argument("--eager", default=f"{d}/torch-eager.json")
    p.add_argument("--compile", default=f"{d}/torch-compile.json")
    p.add_argument("--out", default=f"{d}/report", help="output path without extension")
    a = p.parse_args()
    ours = load(a.ours, required=True)
    eager = load(a.eager, required=False)
    compiled = load(a.compile, required=False)

    lines = header(ours, eager, compiled)
    groups = [("main", "## The issue's cases"),
              ("sweep", "## Hidden-size sweep of the norm kernels (rows x hidden = 2^28 elements)")]
    for group, title in groups:
        cases = [c for c in ours["cases"] if c.get("group") == group]
        if cases:
            lines += [title, ""] + table(cases, ours, eager, compiled) + [""]
    png = a.out + "-sweep.png"
    plotted = plot(ours, eager, compiled, png)
    if plotted:
        lines += [f"![GB/s against hidden size]({os.path.basename(png)})", ""]
    text = "\n".join(lines)
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out + ".md", "w") as f:
        f.write(text)
    print(text)
    print(f"report: wrote {a.out}.md" + (f" and {png}" if plotted else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
