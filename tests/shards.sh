#!/usr/bin/env bash
# test_shards: KILN_TEST_SHARD splits a test program's tests among its
# shards. Runs PROGRAM whole, then as 3 shards: every shard passes, no test
# runs in two shards, and together they run exactly the whole program's
# tests. A malformed value fails the program before it runs a test.
# Usage: shards.sh PROGRAM
set -euo pipefail
program=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

names() { grep -E '^\[ RUN +\] ' | sed -E 's/^\[ RUN +\] //' | sort; }

KILN_TEST_SHARD= "$program" >"$dir/whole.txt" 2>&1
names <"$dir/whole.txt" >"$dir/whole"
count=$(wc -l <"$dir/whole")
if ((count < 6)); then
    echo "shards.sh: $program ran $count tests; the check wants at least 6" >&2
    exit 1
fi
: >"$dir/shards"
for i in 0 1 2; do
    if ! KILN_TEST_SHARD="$i/3" "$program" >"$dir/shard$i.txt" 2>&1; then
        echo "shards.sh: shard $i/3 of $program failed:" >&2
        cat "$dir/shard$i.txt" >&2
        exit 1
    fi
    names <"$dir/shard$i.txt" >"$dir/shard$i"
    if [[ ! -s $dir/shard$i ]]; then
        echo "shards.sh: shard $i/3 of $program ran no test" >&2
        exit 1
    fi
    cat "$dir/shard$i" >>"$dir/shards"
done
sort "$dir/shards" -o "$dir/shards"
if ! cmp -s "$dir/whole" "$dir/shards"; then
    echo "shards.sh: the shards of $program ran other tests than the whole program (whole < > shards):" >&2
    diff "$dir/whole" "$dir/shards" >&2 || true
    exit 1
fi
for bad in 3/3 x 1/0 -1/3 1/3x " 1/3" 0/1001; do
    if KILN_TEST_SHARD="$bad" "$program" >"$dir/bad.txt" 2>&1; then
        echo "shards.sh: KILN_TEST_SHARD=\"$bad\" did not fail $program" >&2
        exit 1
    fi
    if grep -qE '^\[ RUN' "$dir/bad.txt" || ! grep -q "KILN_TEST_SHARD=\"$bad\" is not" "$dir/bad.txt"; then
        echo "shards.sh: KILN_TEST_SHARD=\"$bad\" ran tests or did not say why it failed:" >&2
        cat "$dir/bad.txt" >&2
        exit 1
    fi
done
echo "shards.sh: $count tests of $(basename "$program") in 3 shards of $(wc -l <"$dir/shard0"), $(wc -l <"$dir/shard1") and $(wc -l <"$dir/shard2"); 7 malformed values refused"
