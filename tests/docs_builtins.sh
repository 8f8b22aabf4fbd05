#!/bin/sh
# docs_builtins.sh LIST_BUILTINS LANGUAGE_MD - the Builtins tables of
# docs/language.md (the rows of the tables under "### Builtins", up to the
# next heading) name, in their first column, every name a program can
# call (LIST_BUILTINS prints them from the compiler's tables), and no
# name the compiler does not have.
set -u
LIST=$1 DOC=$2
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT

"$LIST" | sort -u > "$T/have" || { echo "FAIL: $LIST did not run" >&2; exit 1; }
[ "$(wc -l < "$T/have")" -ge 100 ] || { echo "FAIL: $LIST listed too few names" >&2; exit 1; }
# The first cell of each table row under "### Builtins", its `names`.
awk '/^### /{on = ($0 == "### Builtins"); next} /^## /{on = 0}
     on && /^\| *`/ { split($0, c, "|"); print c[2] }' "$DOC" |
    grep -o '`[A-Za-z_][A-Za-z0-9_]*`' | tr -d '`' | sort -u > "$T/documented"
[ -s "$T/documented" ] || { echo "FAIL: no Builtins table in $DOC" >&2; exit 1; }

missing=$(comm -23 "$T/have" "$T/documented")
extra=$(comm -13 "$T/have" "$T/documented")
[ -z "$missing" ] || echo "FAIL: $DOC, Builtins, does not document:" $missing >&2
[ -z "$extra" ] || echo "FAIL: $DOC, Builtins, documents names graphrun does not have:" $extra >&2
[ -z "$missing" ] && [ -z "$extra" ]
