#!/usr/bin/env python3
"""treesync benchmark report: OUT/{runs,syscalls,datasets}.csv -> results.json, results.md, results.svg.

    report.py OUT                               the report of one run, in OUT
    report.py OUT --merge OLD.json --into DIR   this run's figures merged into an earlier summary
                                                (figures of the filesystems and datasets measured
                                                now replace the old ones; the others are kept),
                                                written to DIR/results.{json,md,svg}

Figures: the median wall time of each program over the runs; its ratio to `rsync -a --delete`,
taken run by run (run i of a program against run i of rsync, which ran right before or after
it on the same starting state) and then the median of those ratios, and the same against the
parallel stat walk (the floor); system calls of the warm no-op run (strace -f -c) and, on sshfs,
the SFTP requests it sent; peak RSS; on sshfs, issue 11's targets with the measured ratios.
Standard library only; the SVG is drawn here by hand.
"""

import argparse
import csv
import html
import json
import math
import os
import statistics
from collections import OrderedDict, defaultdict

SCENARIOS = ["cold", "noop", "touch", "modify", "churn"]
TITLES = {"cold": "cold", "noop": "warm no-op", "touch": "touch 1%", "modify": "modify 1%", "churn": "churn"}
FS_TITLES = {"ext4": "ext4 (loop image)", "tmpfs": "tmpfs", "fuse": "high-latency FUSE",
             "local-fuse": "high-latency FUSE, local \u2192 FUSE",
             "local-sshfs": "sshfs, local \u2192 sshfs", "sshfs-sshfs": "sshfs, sshfs \u2192 sshfs"}
SSHFS = ("local-sshfs", "sshfs-sshfs")
DS_TITLES = {"usr_include": "/usr/include copy", "synth": "build tree (40k files + 3 x 200 MB)",
             "mem": "200k small files"}
REFERENCE = "rsync -a"
# issue 11's targets on sshfs (medians, /usr/include copy): (shapes, scenario, against, bound, text)
# "rsync": rsync's time / treesync's >= bound; "walk": treesync's time / the parallel walk's <= bound
TARGETS = [
    (SSHFS, "noop", "rsync", 3.0, "warm no-op \u2265 3x faster than `rsync -a --delete`"),
    (("local-sshfs",), "noop", "walk", 1.3, "warm no-op \u2264 1.3x the parallel stat walk of both trees"),
    (SSHFS, "churn", "rsync", 2.0, "churn \u2265 2x faster than `rsync -a --delete`"),
    (SSHFS, "cold", "rsync", 3.0, "cold \u2265 3x faster than `rsync -a --delete`"),
]


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def tool_order(names):
    """treesync first, then the peers, the stat walks (the floor) last."""
    def key(n):
        if n.startswith("treesync"):
            return (0, n)
        if n.startswith("stat walk"):
            return (3, n)
        if n == "fs_mirror":
            return (2, n)
        return (1, ["rsync -a", "rsync -aL", "cp -a", "tar | tar"].index(n) if n in
                ["rsync -a", "rsync -aL", "cp -a", "tar | tar"] else 9, n)
    return sorted(names, key=key)


def summarize(out):
    runs = read_csv(os.path.join(out, "runs.csv"))
    sysc = read_csv(os.path.join(out, "syscalls.csv"))
    dsets = read_csv(os.path.join(out, "datasets.csv"))
    meta = {}
    if os.path.exists(os.path.join(out, "meta.json")):
        with open(os.path.join(out, "meta.json")) as f:
            meta = json.load(f)

    # (fs, ds, scenario) -> tool -> run -> row
    cells = OrderedDict()
    for r in runs:
        key = (r["fs"], r["dataset"], r["scenario"])
        cells.setdefault(key, OrderedDict()).setdefault(r["tool"], {})[int(r["run"])] = r
    def num(v):
        return int(v) if v not in (None, "", "None") else None

    counted = {}
    for r in sysc:
        counted[(r["fs"], r["dataset"], r["scenario"], r["tool"])] = {
            k: num(r.get(k)) for k in ("calls", "errors", "write_calls", "read_calls", "sftp_requests",
                                       "sftp_writes", "sftp_reads", "sftp_read_opens", "sftp_stats",
                                       "sftp_readdirs")}

    def per_run_ratios(by_run, ref):
        return [float(r["wall_s"]) / float(ref[i]["wall_s"]) for i, r in by_run.items()
                if i in ref and float(ref[i]["wall_s"]) > 0 and r["wall_s"] != "nan"]

    results = []
    for (fs, ds, sc), tools in cells.items():
        ref = tools.get(REFERENCE, {})
        # the floor: the parallel stat walk where it ran, else the serial one
        walks = sorted(t for t in tools if t.startswith("stat walk"))
        floor = tools.get(walks[-1], {}) if walks else {}
        for tool, by_run in tools.items():
            walls = [float(r["wall_s"]) for r in by_run.values() if r["wall_s"] != "nan"]
            cpus = [float(r["user_s"]) + float(r["sys_s"]) for r in by_run.values() if r["wall_s"] != "nan"]
            ratios = per_run_ratios(by_run, ref)
            to_walk = per_run_ratios(by_run, floor) if floor and not tool.startswith("stat walk") else []
            rss = [int(r["maxrss_kib"]) for r in by_run.values()]
            pss = [int(r.get("peak_pss_kib") or 0) for r in by_run.values()]
            failed = [int(r["exit"]) for r in by_run.values() if int(r["exit"]) != 0]
            c = counted.get((fs, ds, sc, tool), {})
            results.append({
                "fs": fs, "dataset": ds, "scenario": sc, "tool": tool,
                "runs": len(walls),
                "median_s": statistics.median(walls) if walls else None,
                "min_s": min(walls) if walls else None,
                "max_s": max(walls) if walls else None,
                "ratio_to_rsync": statistics.median(ratios) if ratios else None,
                "ratio_to_walk": statistics.median(to_walk) if to_walk else None,
                "walk": walks[-1] if to_walk else None,
                "median_cpu_s": statistics.median(cpus) if cpus else None,
                "peak_rss_kib": max(rss) if rss else None,
                "peak_pss_total_kib": max(pss) if pss and max(pss) > 0 else None,
                "syscalls": c.get("calls"),
                "failed_syscalls": c.get("errors"),
                "write_syscalls": c.get("write_calls"),
                "read_syscalls": c.get("read_calls"),
                "sftp": {k[5:]: c[k] for k in c if k.startswith("sftp_") and c[k] is not None} or None,
                "nonzero_exits": failed,
            })
    # each dataset row says when and how it was measured, so that merged summaries stay readable
    for d in dsets:
        for k in ("date", "commit", "nice"):
            if k in meta:
                d.setdefault(k, meta[k])
        d.setdefault("runs", "")
        if not d.get("loadavg_start"):  # a summary of an older harness: the run's load average
            d["loadavg_start"], d["loadavg_end"] = meta.get("loadavg_start", ""), meta.get("loadavg_end", "")
    return {"meta": meta, "datasets": dsets, "results": results}


def merge(old, new):
    """`new`'s figures, plus those of `old` for the (filesystem, dataset) pairs `new` did not
    measure; groups keep their place in `old`, new ones go last."""
    measured = {(r["fs"], r["dataset"]) for r in new["results"]}
    order = []
    for r in old.get("results", []) + new["results"]:
        if (r["fs"], r["dataset"]) not in order:
            order.append((r["fs"], r["dataset"]))
    results, dsets = [], []
    for key in order:
        src = new if key in measured else old
        results += [r for r in src["results"] if (r["fs"], r["dataset"]) == key]
        dsets += [d for d in src["datasets"] if (d["fs"], d["dataset"]) == key]
    meta = dict(old.get("meta", {}))
    fs_now = {fs for fs, _ in measured}
    for k, v in new["meta"].items():
        if k == "fuse" and "fuse" not in fs_now:
            continue
        if k == "sshfs" and not fs_now & set(SSHFS):
            continue
        meta[k] = v
    return {"meta": meta, "datasets": dsets, "results": results}


def fmt_s(s):
    if s is None:
        return "-"
    if s < 1:
        return f"{s * 1000:.0f} ms" if s >= 0.0995 else f"{s * 1000:.1f} ms"
    return f"{s:.2f} s"


def fmt_int(n):
    return "-" if n is None else f"{n:,}"


def markdown(summary):
    res = summary["results"]
    meta = summary["meta"]
    lines = ["# treesync benchmark results", ""]
    if meta:
        lines.append(f"{meta.get('machine', '')}; hot page cache; measured programs at nice "
                     f"{meta.get('nice', 0)}. When, which commit, how many runs and the load average at the "
                     f"start and the end: under each heading.")
        if meta.get("versions"):
            lines.append("Peers: " + "; ".join(meta["versions"]) + ".")
        if meta.get("fuse"):
            lines.append(f"FUSE: {meta['fuse']}.")
        if meta.get("sshfs"):
            lines.append(f"sshfs: {meta['sshfs']}.")
        lines.append("")
    lines += [
        "Each cell: median wall time, and in parentheses the median over runs of the time divided by",
        "`rsync -a --delete`'s in the same run (below 1 is faster). `÷ walk`: the warm no-op's median",
        "over runs of the time divided by the parallel stat walk's (both trees, the floor) in the same",
        "run. `syscalls`: `strace -f -c` total of the warm no-op run. `peak RSS`: largest single",
        "process (rusage), cold / warm no-op; `peak PSS, all processes`: the whole process tree (rsync",
        "runs as 3 processes), sampled every 10 ms from /proc/PID/smaps_rollup, on the 200k-file tree",
        "only.",
        "",
    ]
    groups = OrderedDict()
    for r in res:
        groups.setdefault((r["fs"], r["dataset"]), []).append(r)
    dsinfo = {(d["fs"], d["dataset"]): d for d in summary["datasets"]}
    for (fs, ds), rows in groups.items():
        info = dsinfo.get((fs, ds))
        title = f"## {FS_TITLES.get(fs, fs)}: {DS_TITLES.get(ds, ds)}"
        lines.append(title)
        lines.append("")
        if info:
            lines.append(f"{int(info['files']):,} files, {int(info['dirs']):,} directories, "
                         f"{int(info['symlinks']):,} symlinks, {int(info['bytes']) / 1e6:,.0f} MB."
                         + (f" Changes: {info['variants']}." if info.get("variants") else ""))
            when = [info.get("date", ""), f"treesync {info['commit']}" if info.get("commit") else "",
                    (f"median of {info['runs']} runs" if str(info['runs']) != "1" else "1 run") if info.get("runs") else "",
                    (f"load average {info['loadavg_start']} at the start, {info['loadavg_end']} at the end"
                     if info.get("loadavg_start") else "")]
            if any(when):
                lines.append("Measured " + "; ".join(w for w in when if w) + ".")
            lines.append("")
        scs = [s for s in SCENARIOS if any(r["scenario"] == s for r in rows)]
        by = {(r["tool"], r["scenario"]): r for r in rows}
        tools = tool_order({r["tool"] for r in rows})
        has_sys = any(r["syscalls"] is not None for r in rows)
        has_pss = any(r["peak_pss_total_kib"] is not None for r in rows)
        has_walk = any(r.get("ratio_to_walk") is not None for r in rows if r["scenario"] == "noop")
        walk_name = next((r["walk"] for r in rows if r.get("walk")), "stat walk")
        head = (["program"] + [TITLES[s] for s in scs] +
                ([f"no-op ÷ {walk_name}"] if has_walk else []) +
                (["syscalls (no-op)"] if has_sys else []) +
                ["peak RSS"] + (["peak PSS, all processes"] if has_pss else []))
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for t in tools:
            cells = [(f"`{t}`" if not t.startswith("stat walk") else f"{t} (floor)").replace("|", "\\|")]
            for s in scs:
                r = by.get((t, s))
                if not r or r["median_s"] is None:
                    cells.append("")
                    continue
                c = fmt_s(r["median_s"])
                if r["ratio_to_rsync"] is not None and t != REFERENCE:
                    c += f" ({r['ratio_to_rsync']:.2f})"
                if r["nonzero_exits"]:
                    c += f" exit {sorted(set(r['nonzero_exits']))[0]}!"
                cells.append(c)
            if has_walk:
                r = by.get((t, "noop"))
                cells.append(f"{r['ratio_to_walk']:.2f}" if r and r.get("ratio_to_walk") is not None else "")
            if has_sys:
                r = by.get((t, "noop"))
                cells.append(fmt_int(r["syscalls"]) if r else "")
            rss = []
            for s in ("cold", "noop"):
                r = by.get((t, s))
                rss.append(f"{r['peak_rss_kib'] / 1024:.1f}" if r and r["peak_rss_kib"] else "-")
            cells.append(" / ".join(rss) + " MiB")
            if has_pss:
                pss = []
                for s in ("cold", "noop"):
                    r = by.get((t, s))
                    pss.append(f"{r['peak_pss_total_kib'] / 1024:.1f}" if r and r["peak_pss_total_kib"] else "-")
                cells.append(" / ".join(pss) + " MiB")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines += counted_table(tools, by)
        lines += targets_table(fs, ds, by)
        lines.append("<details><summary>CPU time (user + sys, all processes, median)</summary>")
        lines.append("")
        lines.append("| program | " + " | ".join(TITLES[s] for s in scs) + " |")
        lines.append("|" + "---|" * (len(scs) + 1))
        for t in tools:
            cells = [(f"`{t}`" if not t.startswith("stat walk") else t).replace("|", "\\|")]
            for s in scs:
                r = by.get((t, s))
                cells.append(fmt_s(r["median_cpu_s"]) if r and r["median_cpu_s"] is not None else "")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines.append("</details>")
        lines.append("")
    return "\n".join(lines) + "\n"


def counted_table(tools, by):
    """What one warm no-op (after a settling run) sent the sshfs server and asked the kernel."""
    rows = [(t, by[(t, "noop")]) for t in tools if (t, "noop") in by and by[(t, "noop")].get("sftp")]
    if not rows:
        return []
    out = ["Warm no-op, one more run after the timed ones, counted: SFTP requests at the server (its",
           "log), by kind (write-type: opens for writing, writes, set-stat, renames, removes, mkdir, rmdir,",
           "symlink), and system calls (`strace -f -c`; write-type: write, utimensat, chmod, rename,",
           "unlink, mkdir, copy_file_range...; read: read, pread64...; rsync's include the pipes between",
           "its processes).",
           "",
           "| program | SFTP requests | write-type | data reads | opens for reading | stats | readdirs "
           "| syscalls | write-type syscalls | read syscalls |",
           "|" + "---|" * 10]
    for t, r in rows:
        q = r["sftp"]
        name = (f"`{t}`" if not t.startswith("stat walk") else t).replace("|", "\\|")
        out.append("| " + " | ".join([name] + [fmt_int(q.get(k)) for k in
                                               ("requests", "writes", "reads", "read_opens", "stats", "readdirs")]
                                     + [fmt_int(r.get(k)) for k in ("syscalls", "write_syscalls", "read_syscalls")])
                   + " |")
    out.append("")
    return out


def targets_table(fs, ds, by):
    """Issue 11's targets for this shape, with the measured ratios (treesync -jN and serial)."""
    if fs not in SSHFS or ds != "usr_include":
        return []
    out = ["Targets (issue 11), medians over runs of the per-run ratio:", "",
           "| target | program | measured | |", "|---|---|---|---|"]
    names = sorted({t for t, _ in by if t.startswith("treesync")}, key=lambda n: (n == "treesync", n))
    for shapes, sc, against, bound, text in TARGETS:
        if fs not in shapes:
            continue
        for t in names:
            r = by.get((t, sc))
            if not r:
                continue
            if against == "rsync" and r.get("ratio_to_rsync"):
                x = 1 / r["ratio_to_rsync"]
                how = f"{x:.2f}x faster" if x >= 1 else f"{1 / x:.2f}x slower"
                out.append(f"| {text} | `{t}` | {how} | {'met' if x >= bound else 'missed'} |")
            elif against == "walk" and r.get("ratio_to_walk"):
                x = r["ratio_to_walk"]
                out.append(f"| {text} | `{t}` | {x:.2f}x the walk | {'met' if x <= bound else 'missed'} |")
    out.append("")
    return out


# ---- SVG: small multiples, one panel per (filesystem, dataset) x scenario ----------------------
PALETTE = {
    "treesync": "#1f5fae",
    "rsync -a": "#d9822b",
    "rsync -aL": "#f2b36b",
    "cp -a": "#5a9e4b",
    "tar | tar": "#9ccf8a",
    "fs_mirror": "#9b5fb4",
    "stat walk": "#8a8a8a",
}


def color(tool):
    if tool in PALETTE:
        return PALETTE[tool]
    if tool.startswith("treesync"):
        return "#5fa0e6"
    if tool.startswith("stat walk"):
        return "#c2c2c2"
    return "#666666"


def svg(summary):
    res = summary["results"]
    rows = OrderedDict()
    for r in res:
        rows.setdefault((r["fs"], r["dataset"]), {}).setdefault(r["scenario"], {})[r["tool"]] = r
    if not rows:
        return '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>'
    scs = [s for s in SCENARIOS if any(s in v for v in rows.values())]
    tools = tool_order({r["tool"] for r in res})

    left, top, cell_w, gap = 120, 64, 200, 14
    bar_h, bar_gap = 11, 3
    cell_h = 22 + len(tools) * (bar_h + bar_gap)
    width = left + len(scs) * (cell_w + gap) + 10
    height = top + len(rows) * (cell_h + 26) + 30
    o = []
    add = o.append
    add(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="10">')
    add(f'<rect width="{width}" height="{height}" fill="#ffffff"/>')
    add('<text x="10" y="18" font-size="14" font-weight="bold">treesync vs rsync, cp, tar and a '
        'std::filesystem loop: median wall time (shorter is better)</text>')
    add('<text x="10" y="34" fill="#444">each panel is scaled to its slowest program; the label is the median '
        'time and, in parentheses, the ratio to rsync -a --delete in the same runs; treesync = serial, '
        'stat walk = the floor</text>')
    # legend
    x = 10
    for t in tools:
        add(f'<rect x="{x}" y="44" width="10" height="10" fill="{color(t)}"/>')
        add(f'<text x="{x + 13}" y="53">{html.escape(t)}</text>')
        x += 18 + 6.2 * len(t)
    y0 = top
    for (fs, ds), by_sc in rows.items():
        add(f'<text x="10" y="{y0 + 14}" font-size="12" font-weight="bold">'
            f'{html.escape(FS_TITLES.get(fs, fs))} - {html.escape(DS_TITLES.get(ds, ds))}</text>')
        y = y0 + 22
        for i, t in enumerate(tools):
            add(f'<text x="{left - 6}" y="{y + 18 + i * (bar_h + bar_gap) + bar_h - 2}" '
                f'text-anchor="end">{html.escape(t)}</text>')
        for j, sc in enumerate(scs):
            cx = left + j * (cell_w + gap)
            cell = by_sc.get(sc, {})
            add(f'<rect x="{cx}" y="{y}" width="{cell_w}" height="{cell_h}" fill="#f7f7f7" stroke="#dddddd"/>')
            add(f'<text x="{cx + 4}" y="{y + 12}" font-weight="bold">{TITLES[sc]}</text>')
            vals = [r["median_s"] for r in cell.values() if r["median_s"] is not None]
            if not vals:
                add(f'<text x="{cx + cell_w / 2}" y="{y + cell_h / 2}" text-anchor="middle" fill="#999999">'
                    f'not run</text>')
                continue
            vmax = max(vals)
            for i, t in enumerate(tools):
                r = cell.get(t)
                if not r or r["median_s"] is None:
                    continue
                by = y + 18 + i * (bar_h + bar_gap)
                w = max(1.0, (cell_w - 76) * r["median_s"] / vmax)
                add(f'<rect x="{cx + 2}" y="{by}" width="{w:.1f}" height="{bar_h}" fill="{color(t)}">'
                    f'<title>{html.escape(t)}: {fmt_s(r["median_s"])}</title></rect>')
                label = fmt_s(r["median_s"])
                if r["ratio_to_rsync"] is not None and t != REFERENCE:
                    label += f" ({r['ratio_to_rsync']:.2f})"
                add(f'<text x="{cx + 5 + w:.1f}" y="{by + bar_h - 2}" font-size="9">{html.escape(label)}</text>')
        y0 += cell_h + 26
    add("</svg>")
    return "\n".join(o) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--merge", help="an earlier results.json to merge this run's figures into")
    p.add_argument("--into", help="where the merged results.{json,md,svg} go (default: OUT)")
    args = p.parse_args()
    summary = summarize(args.out)
    if args.merge and os.path.exists(args.merge):
        with open(args.merge) as f:
            summary = merge(json.load(f), summary)
    into = args.into or args.out
    with open(os.path.join(into, "results.json"), "w") as f:
        json.dump(summary, f, indent=1, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(into, "results.md"), "w") as f:
        f.write(markdown(summary))
    with open(os.path.join(into, "results.svg"), "w") as f:
        f.write(svg(summary))
    print(f"report: {os.path.join(into, 'results.md')}, results.svg, results.json")


if __name__ == "__main__":
    main()
