#!/usr/bin/env python3
"""Plots index and page latency against table size from bench_scale.py
results, and beside it the ratios issue 35 sets targets for: a cold page
against the larger of its parts, cached pages and `304`s against nginx.

Usage:
    scripts/plot_bench.py benches/results/{1m,10m,100m}.json --out benches/results/latency.png

A result named NAME-BUILD.json is labelled with its build. Needs
matplotlib (pip).
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def label(path, run):
    """The run's size, and its build when the file's name gives one."""
    name = os.path.splitext(os.path.basename(path))[0]
    build = name.split("-", 1)[1] if "-" in name else None
    return f"{run['label']}\n{build}" if build else run["label"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="JSON files from bench_scale.py")
    parser.add_argument("--out", required=True, help="PNG to write")
    args = parser.parse_args()
    runs = sorted(((json.load(open(path)), path) for path in args.results), key=lambda r: r[0]["rows"])
    rows = [run["rows"] for run, _ in runs]
    ticks = [label(path, run) for run, path in runs]
    runs = [run for run, _ in runs]
    latencies = [
        ("index, median", [r["index"]["median_ms"] for r in runs], "o-"),
        ("index, p99", [r["index"]["p99_ms"] for r in runs], "o--"),
        ("cold page build, median", [r["cold_page"]["median_ms"] for r in runs], "s-"),
        ("cold page build, p99", [r["cold_page"]["p99_ms"] for r in runs], "s--"),
        ("its DB read alone, median", [r["cold_page"]["db_read_median_ms"] for r in runs], "x:"),
        ("its gzip alone, median", [r["cold_page"]["gzip_median_ms"] for r in runs], "+:"),
        ("cached page, p50 (16 conns)", [r["cached_c16_sitemapd"]["p50_ms"] for r in runs], "^-"),
    ]
    ratios = [
        ("cold build / max(DB read, gzip), median (≤ 1.1)", [r["cold_page"]["ratio_to_max"] for r in runs], "s-"),
        ("the same, p99 (≤ 1.1)", [r["cold_page"]["p99_ratio_to_max"] for r in runs], "s--"),
        ("cached page / nginx, 16 conns (≥ 1)", [r["cached_c16_ratio"] for r in runs], "^-"),
        ("cached page / nginx, 64 conns (≥ 1)", [r["cached_c64_ratio"] for r in runs], "^--"),
        ("304 / nginx, 16 conns (≥ 1)", [r["304_c16_ratio"] for r in runs], "v-"),
        ("304 / nginx, 64 conns (≥ 1)", [r["304_c64_ratio"] for r in runs], "v--"),
    ]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5), dpi=110)
    for label_text, values, style in latencies:
        left.plot(rows, values, style, label=label_text)
    left.set_yscale("log")
    left.set_ylabel("latency (ms, log scale)")
    left.set_title("latency against table size")
    for label_text, values, style in ratios:
        right.plot(rows, values, style, label=label_text)
    right.axhline(1.0, color="grey", linewidth=0.8)
    right.axhline(1.1, color="grey", linewidth=0.8, linestyle=":")
    right.set_ylabel("ratio")
    right.set_title("against the targets, measured side by side")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xticks(rows, ticks)
        ax.minorticks_off()
        ax.set_xlabel("rows in sitemap_urls, and the build")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("sitemapd (2 cores, PostgreSQL on the same box)")
    fig.tight_layout()
    fig.savefig(args.out)


if __name__ == "__main__":
    main()
