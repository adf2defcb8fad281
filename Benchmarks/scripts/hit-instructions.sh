#!/usr/bin/env bash
# Counts the instructions of one hit (CachedTransport.data(for:) answered from memory) with
# valgrind's callgrind, beside one Dictionary<String, Data> lookup, its floor, and one hit while an
# events() listener reads every event (the listener's work included). Instruction counts do
# not move with the load of a shared machine the way times do, so they compare runs and commits.
#
#     Benchmarks/scripts/hit-instructions.sh [COUNT]      # default 20000 operations each
#
# Each figure is the instructions executed by the measured loop of `PathWorkload` (hits over 1,000
# stored entries in turn, the loop's own counting included) divided by the count; the setup before
# it is not counted. Hashing is made deterministic, and the keys rotate, so that the figure does
# not depend on how one key's hash falls. Needs valgrind (3.19 was used).
set -euo pipefail
cd "$(dirname "$0")/../.."
count="${1:-20000}"

swift build -c release --package-path Benchmarks --product PathWorkload >&2
binary="$(swift build -c release --package-path Benchmarks --show-bin-path)/PathWorkload"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# valgrind 3.19 cannot read the DWARF 5 debug information Swift 6.3 writes: count a stripped copy.
objcopy --strip-debug "$binary" "$work/PathWorkload"

instructions() {
    SWIFT_DETERMINISTIC_HASHING=1 valgrind --tool=callgrind --collect-atstart=no \
        --callgrind-out-file="$work/$1.out" "$work/PathWorkload" "$1" "$count" 2>"$work/$1.log" >&2 \
        || { cat "$work/$1.log" >&2; exit 1; }
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/$1.log"
}

hit=$(instructions hit)
lookup=$(instructions dictionary)
listening=$(instructions hit-listening)
adapter=$(instructions hit-adapter)
keyed=$(instructions hit-keyed-adapter)
header=$(instructions hit-keyed-header)
accounts=$(instructions hit-accounts)
authenticator=$(instructions hit-authenticator)
partitions=$(instructions hit-partitions)
python3 - "$hit" "$lookup" "$listening" "$adapter" "$keyed" "$header" "$accounts" "$authenticator" "$partitions" "$count" <<'PY'
import sys
hit, lookup, listening, adapter, keyed, header, accounts, authenticator, partitions, count = (
    int(value) for value in sys.argv[1:])
print(f"instructions per hit: {hit / count:.0f}")
print(f"instructions per Dictionary<String, Data> lookup: {lookup / count:.0f}")
print(f"ratio: {hit / lookup:.1f}x")
print(f"instructions per hit with one events() listener: {listening / count:.0f}")
print(f"instructions per hit with one sending adapter adding a header: {adapter / count:.0f} ({adapter / hit:.2f}x)")
print(f"instructions per hit with one keyed adapter adding a header: {keyed / count:.0f} ({keyed / hit:.2f}x)")
print(f"instructions per hit with one keyed header: {header / count:.0f} ({header / hit:.2f}x)")
print(f"instructions per hit of one of several accounts: {accounts / count:.0f} ({accounts / hit:.2f}x)")
print(f"instructions per hit with an authenticator: {authenticator / count:.0f} ({authenticator / hit:.2f}x)")
print(f"instructions per hit with an authenticator and partitions: {partitions / count:.0f} ({partitions / hit:.2f}x)")
PY
