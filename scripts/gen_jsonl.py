#!/usr/bin/env python3
"""Writes N JSON Lines records for the import benchmarks: three sections,
every field set, locs in hash order (so the file is not already in key
order), under the default base URL, http://localhost:8080/.

    scripts/gen_jsonl.py N PATH
"""
import hashlib
import sys

lines, path = int(sys.argv[1]), sys.argv[2]
sections = ["blog", "products", "news"]
with open(path, "w") as out:
    for i in range(lines):
        section = sections[i % 3]
        slug = hashlib.md5(str(i).encode()).hexdigest()[:10]
        out.write('{"loc": "http://localhost:8080/%s/%s-%d", "lastmod": "2026-10-%02dT12:00:00Z", '
                  '"changefreq": "weekly", "priority": 0.5, "section": "%s"}\n'
                  % (section, slug, i, 1 + i % 28, section))
