#!/usr/bin/env python3
"""Plots index and page latency against table size from bench_scale.py
results.

Usage:
    scripts/plot_bench.py benches/results/*.json --out benches/results/latency.png

Needs matplotlib (pip).
"""

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="JSON files from bench_scale.py")
    parser.add_argument("--out", required=True, help="PNG to write")
    args = parser.parse_args()
    runs = sorted((json.load(open(path)) for path in args.results), key=lambda r: r["rows"])
    rows = [r["rows"] for r in runs]
    series = [
        ("index, median", [r["index"]["median_ms"] for r in runs], "o-"),
        ("index, p99", [r["index"]["p99_ms"] for r in runs], "o--"),
        ("cold page build, median", [r["cold_page"]["median_ms"] for r in runs], "s-"),
        ("cold page build, p99", [r["cold_page"]["p99_ms"] for r in runs], "s--"),
        ("its DB read alone, median", [r["cold_page"]["db_read_median_ms"] for r in runs], "x:"),
        ("its gzip alone, median", [r["cold_page"]["gzip_median_ms"] for r in runs], "+:"),
        ("cached page, p50 (16 conns)", [r["cached_c16_sitemapd"]["p50_ms"] for r in runs], "^-"),
    ]
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    for label, values, style in series:
        ax.plot(rows, values, style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(rows, [r["label"] for r in runs])
    ax.set_xlabel("rows in sitemap_urls")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title("sitemapd: latency against table size (2 cores, PostgreSQL on the same box)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out)


if __name__ == "__main__":
    main()
