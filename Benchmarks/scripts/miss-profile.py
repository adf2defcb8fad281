#!/usr/bin/env python3
"""Where a miss's extra time goes: a `perf record -g` profile of `PathWorkload miss-alternating`,
whose samples are told apart by the fetch that was running when each was taken.

    python3 Benchmarks/scripts/miss-profile.py [COUNT]    # default 4000 pairs; needs perf

PathWorkload runs a plain URLSession fetch and a miss through CachedTransport in turn (a new URL
each, warm connections, the loopback origin in the same process) and writes when each fetch ran
(PATHWORKLOAD_TIMELINE); perf stamps its samples with the same clock (CLOCK_MONOTONIC). Samples of
the origin's threads (NIO-*) are left out. A sample is the header override's ("override route":
CacheOverrideURLProtocol, TransportOverrideURLProtocol, PendingAnswer, CacheOverride) when the
innermost TransportCache function on its stack is one of those, the transport's own when it is any
other (helpers such as HeaderFields and Locked count for their caller), and unattributed
otherwise; it is then split by the code it landed in. Figures are CPU time per fetch (on both
cores together), not latency: work on one core while the other waits adds less than its time.
Work a miss leaves behind after it has answered (its outer data task's completion) runs during
the next fetch; it shows as transport or override samples in the plain fetches' windows.
"""
import bisect
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

FREQUENCY = 4000  # samples per CPU-second
OVERRIDE = ("CacheOverrideURLProtocol", "TransportOverrideURLProtocol", "PendingAnswer", "CacheOverride.",
            "Unshared")
HELPERS = ("HeaderFields", "Locked", "ASCII")
MODULE = "$s14TransportCache"


def record(count, work):
    root = Path(__file__).resolve().parent.parent
    subprocess.run(["swift", "build", "-c", "release", "--package-path", str(root), "--product", "PathWorkload"],
                   check=True, stdout=sys.stderr)
    binary = subprocess.run(["swift", "build", "-c", "release", "--package-path", str(root), "--show-bin-path"],
                            check=True, capture_output=True, text=True).stdout.strip() + "/PathWorkload"
    data, timeline = work / "perf.data", work / "timeline.txt"
    subprocess.run(["perf", "record", "-e", "cpu-clock", "-F", str(FREQUENCY), "-g", "-k", "CLOCK_MONOTONIC",
                    "-o", str(data), binary, "miss-alternating", str(count)],
                   check=True, env={**os.environ, "PATHWORKLOAD_TIMELINE": str(timeline)}, stdout=sys.stderr)
    script = subprocess.run(["perf", "script", "-i", str(data), "--ns", "-F", "comm,tid,time,ip,sym,dso"],
                            check=True, capture_output=True, text=True, errors="replace").stdout
    return script, timeline.read_text()


def parse_samples(script):
    """[(thread name, CLOCK_MONOTONIC ns, [(symbol, library) from the leaf up])]"""
    header = re.compile(r"^(.*?)\s+\d+\s+(\d+)\.(\d+):\s*$")
    samples = []
    for line in script.splitlines():
        found = header.match(line)
        if found:
            samples.append((found.group(1).strip(), int(found.group(2)) * 10**9 + int(found.group(3).ljust(9, "0")), []))
        elif line.strip() and samples:
            parts = line.strip().split(None, 1)
            if len(parts) == 2 and parts[1].endswith(")") and "(" in parts[1]:
                cut = parts[1].rfind("(")
                samples[-1][2].append((parts[1][:cut].strip(), parts[1][cut + 1:-1].rsplit("/", 1)[-1]))
    return samples


def demangler(samples):
    symbols = sorted({symbol for _, _, frames in samples for symbol, _ in frames if symbol.startswith("$s")})
    names = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(symbols), check=True,
                           capture_output=True, text=True).stdout.split("\n")
    table = dict(zip(symbols, names))
    return lambda symbol: table.get(symbol, symbol)


def owner(frames, name):
    helper = False
    for symbol, _ in frames:
        if not symbol.startswith(MODULE):
            continue
        function = name(symbol)
        if any(marker in function for marker in OVERRIDE):
            return "override route"
        if any(re.match(rf"(specialized )?(static )?{helper_name}\b", function) for helper_name in HELPERS):
            helper = True
            continue
        return "transport's own"
    return "transport's own" if helper else "unattributed"


def landed(frames):
    if not frames:
        return "other"
    symbol, library = frames[0]
    if symbol.startswith(MODULE):
        return "TransportCache code"
    if "kernel" in library:
        return "kernel"
    if "curl" in library:
        return "libcurl"
    if "Foundation" in library or "ICU" in library:
        return "Foundation, ICU"
    return "runtime, dispatch, libc"


def median(values):
    return sorted(values)[len(values) // 2] if values else 0


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    with tempfile.TemporaryDirectory() as work:
        script, timeline = record(count, Path(work))
    windows = sorted((int(start), int(end), kind) for kind, start, end in (line.split() for line in timeline.splitlines()))
    starts = [window[0] for window in windows]
    fetches = collections.Counter(kind for _, _, kind in windows)

    def window(ns):
        index = bisect.bisect_right(starts, ns) - 1
        return windows[index][2] if index >= 0 and ns < windows[index][1] else None

    samples = parse_samples(script)
    name = demangler(samples)
    per_fetch = 1e6 / FREQUENCY  # µs of CPU per sample
    by_category = collections.Counter()
    leaves = collections.Counter()
    functions = collections.Counter()
    for thread, ns, frames in samples:
        kind = window(ns)
        if kind is None or thread.startswith("NIO-"):
            continue
        sign = 1 if kind == "miss" else -1
        by_category[(kind, owner(frames, name), landed(frames))] += 1
        if frames:
            leaves[(name(frames[0][0]), frames[0][1])] += sign
        for function in {re.sub(r" in .*", "", name(symbol)) for symbol, _ in frames if symbol.startswith(MODULE)}:
            functions[(kind, function)] += 1

    def us(samples_, kind):
        return samples_ * per_fetch / fetches[kind]

    # Wall time, from the timeline: each miss against the plain fetch of its pair.
    durations = collections.defaultdict(list)
    for start, end, kind in windows:
        durations[kind].append(end - start)
    pairs = list(zip(*(iter(line.split() for line in timeline.splitlines()),) * 2))
    added, plain_first, plain_second = [], [], []
    for (_, plain_start, plain_end), (_, miss_start, miss_end) in pairs:
        plain_time, miss_time = int(plain_end) - int(plain_start), int(miss_end) - int(miss_start)
        added.append(miss_time - plain_time)
        (plain_first if int(plain_start) < int(miss_start) else plain_second).append(plain_time)
    print(f"{count} pairs. Wall p50: plain fetch {median(durations['plain']) / 1e3:.1f} µs, "
          f"miss {median(durations['miss']) / 1e3:.1f} µs, a miss adds {median(added) / 1e3:.1f} µs (p50 of pairs); "
          f"plain fetch going first {median(plain_first) / 1e3:.1f} µs, right after a miss "
          f"{median(plain_second) / 1e3:.1f} µs")

    total = {kind: sum(v for (k, _, _), v in by_category.items() if k == kind) for kind in ("plain", "miss")}
    extra = us(total["miss"], "miss") - us(total["plain"], "plain")
    print(f"CPU per fetch (origin threads left out): plain {us(total['plain'], 'plain'):.0f} µs, "
          f"miss {us(total['miss'], 'miss'):.0f} µs, extra {extra:.0f} µs\n")
    print("| whose | landed in | plain window µs | miss window µs | miss − plain µs | share of the extra |")
    print("|---|---|---:|---:|---:|---:|")
    owners = collections.defaultdict(float)
    for who, where in sorted({(who, where) for _, who, where in by_category}):
        plain = us(by_category[("plain", who, where)], "plain")
        miss = us(by_category[("miss", who, where)], "miss")
        owners[who] += miss - plain
        print(f"| {who} | {where} | {plain:.1f} | {miss:.1f} | {miss - plain:+.1f} | {(miss - plain) / extra:.0%} |")
    for who, value in sorted(owners.items()):
        print(f"| **{who}** | all | | | **{value:+.1f}** | **{value / extra:.0%}** |")

    print("\nLeaf functions, miss windows minus plain windows (µs per fetch):")
    for (function, library), value in leaves.most_common(20):
        print(f"  {value * per_fetch / count:+6.1f}  {library:28} {function[:110]}")
    print("\nTransportCache functions on the stack (µs per fetch; plain windows: left over from the miss before):")
    print("  miss   plain")
    for (kind, function), value in sorted(functions.items(), key=lambda item: -item[1]):
        if kind == "miss" and value * per_fetch / count >= 0.5:
            print(f"  {us(value, 'miss'):5.1f} {us(functions[('plain', function)], 'plain'):5.1f}  {function[:110]}")


if __name__ == "__main__":
    main()
