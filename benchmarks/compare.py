"""Compare two benchmark result folders: every figure equal but times and machine data.

    python -m benchmarks.compare BEFORE_DIR AFTER_DIR [names ...]

Reads ``<name>.json`` from both folders (default: every name present in both) and
compares them recursively. Values under keys that measure the machine rather than the
design (wall-clock times, rates per second, dates, memory, the machine) are skipped;
everything else (cycles, counters, energies, GFLOPS/W, areas, accuracies, texts) must be
equal. Prints one line per benchmark and every difference; exits 1 if any.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

#: key tokens of machine measurements (split on anything but letters and digits)
VOLATILE = {"wall", "seconds", "s", "ms", "date", "machine", "rss", "speed", "cold", "warm"}


def volatile(key: str) -> bool:
    k = str(key).lower()
    if "/s" in k or "per s" in k or "per_s" in k:
        return True
    return bool(VOLATILE & set(t for t in re.split(r"[^a-z0-9]+", k) if t))


def diff(a, b, path: str = "") -> list[str]:
    """Differences between ``a`` and ``b`` (JSON values), volatile keys skipped."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if volatile(k):
                continue
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'after' if k in b else 'before'}")
            else:
                out += diff(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items before, {len(b)} after"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} before, {b!r} after"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("names", nargs="*", help="benchmarks to compare (default: all in both folders)")
    args = ap.parse_args(argv)
    for d in (args.before, args.after):
        if not d.is_dir():
            ap.error(f"{d} is not a folder")
    names = args.names or sorted({p.stem for p in args.before.glob("*.json")} & {p.stem for p in args.after.glob("*.json")})
    bad = 0
    for n in names:
        try:
            a = json.loads((args.before / f"{n}.json").read_text())
            b = json.loads((args.after / f"{n}.json").read_text())
        except (OSError, json.JSONDecodeError) as e:
            print(f"{n}: cannot read: {e}")
            bad += 1
            continue
        d = diff(a, b)
        print(f"{n}: {'identical' if not d else f'{len(d)} difference(s)'}")
        for line in d[:20]:
            print(f"  {line}")
        bad += bool(d)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
