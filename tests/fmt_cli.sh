#!/bin/sh
# fmt_cli.sh GRAPHRUN SRCDIR - `graphrun fmt` end to end, in a scratch folder:
# printing, stdin, --check (diff, exit 1), -w (atomic, keeps the mode,
# leaves canonical files, files with errors and read-only files untouched),
# and every .graph under examples/, tests/models/ and bench/gpu/ passing --check.
set -u
G=$1
SRC=$2
T=$(mktemp -d)
trap 'chmod -R u+w "$T"; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$G" fmt --check "$SRC"/examples/*.graph "$SRC"/tests/models/*.graph "$SRC"/bench/gpu/*.graph ||
    fail "examples or tests/models are not canonical"

printf '# head\nparam lr    = 0.1  # rate\nloss  = f(lr)\n' > "$T/ugly.graph"
printf '# head\nparam lr = 0.1  # rate\nloss = f(lr)\n' > "$T/want.graph"

# printing: stdout, from a file and from stdin; idempotent
"$G" fmt "$T/ugly.graph" > "$T/out.graph" || fail "fmt FILE"
cmp -s "$T/out.graph" "$T/want.graph" || fail "fmt FILE printed something else"
"$G" fmt - < "$T/ugly.graph" | cmp -s - "$T/want.graph" || fail "fmt - (stdin)"
"$G" fmt "$T/out.graph" | cmp -s - "$T/out.graph" || fail "fmt is not idempotent"

# --check: a diff and exit 1; nothing and exit 0 when canonical
"$G" fmt --check "$T/ugly.graph" > "$T/diff.txt"
[ $? -eq 1 ] || fail "--check on a non-canonical file must exit 1"
grep -q "^--- a/$T/ugly.graph" "$T/diff.txt" && grep -q '^@@ -1,3 +1,3 @@' "$T/diff.txt" &&
    grep -q '^-param lr    = 0.1  # rate' "$T/diff.txt" && grep -q '^+loss = f(lr)' "$T/diff.txt" ||
    fail "--check printed no unified diff: $(cat "$T/diff.txt")"
"$G" fmt --check "$T/want.graph" > "$T/diff.txt" && [ ! -s "$T/diff.txt" ] ||
    fail "--check on a canonical file"

# -w: rewrites atomically, keeps the mode, leaves no temporary behind
cp "$T/ugly.graph" "$T/w.graph" && chmod 640 "$T/w.graph"
"$G" fmt -w "$T/w.graph" && cmp -s "$T/w.graph" "$T/want.graph" || fail "-w did not rewrite"
[ "$(stat -c %a "$T/w.graph")" = 640 ] || fail "-w changed the mode"
[ -z "$(ls "$T" | grep '\.tmp\.')" ] || fail "-w left a temporary file"
# a canonical file is not rewritten (same inode, since -w renames)
ino=$(stat -c %i "$T/w.graph")
"$G" fmt -w "$T/w.graph" && [ "$(stat -c %i "$T/w.graph")" = "$ino" ] ||
    fail "-w rewrote a canonical file"

# a file with errors: reported with line, column and caret; untouched
printf 'param a = 1\nvar in = 2\n' > "$T/bad.graph"
cp "$T/bad.graph" "$T/bad.orig"
"$G" fmt -w "$T/bad.graph" 2> "$T/err.txt"
[ $? -eq 1 ] || fail "-w on a file with errors must exit 1"
grep -q "bad.graph:2:5: error: unexpected 'in'" "$T/err.txt" && grep -q '^    \^~$' "$T/err.txt" ||
    fail "error not reported as file:line:col with a caret: $(cat "$T/err.txt")"
cmp -s "$T/bad.graph" "$T/bad.orig" || fail "-w touched a file with errors"
"$G" fmt --check "$T/bad.graph" 2> /dev/null
[ $? -eq 1 ] || fail "--check on a file with errors must exit 1"

# a read-only file: a clear error, untouched
cp "$T/ugly.graph" "$T/ro.graph" && chmod 444 "$T/ro.graph"
"$G" fmt -w "$T/ro.graph" 2> "$T/err.txt" && fail "-w on a read-only file succeeded"
grep -q "ro.graph: the file is read-only; not rewritten" "$T/err.txt" ||
    fail "read-only: $(cat "$T/err.txt")"
cmp -s "$T/ro.graph" "$T/ugly.graph" || fail "-w touched a read-only file"

# misuse
"$G" fmt -w - < "$T/ugly.graph" 2> /dev/null
[ $? -eq 2 ] || fail "-w - must be a usage error"
"$G" fmt -w --check "$T/ugly.graph" 2> /dev/null
[ $? -eq 2 ] || fail "-w --check must be a usage error"
"$G" fmt "$T/nosuch.graph" 2> /dev/null
[ $? -eq 2 ] || fail "a missing file must exit 2"
"$G" fmt --help | grep -q -- '--check' || fail "fmt --help"
echo ok
