#!/bin/sh
# docs_graph_blocks.sh GRAPHRUN MARKDOWN... - every ```graph block of the
# files compiles by itself (graphrun check), but for a block meant as a
# fragment of a larger program, which says so with `<!-- fragment -->` on
# the line before its fence.  A block indented in a list item loses the
# fence's indentation.
set -u
G=$1
shift
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail=0 n=0
for md in "$@"; do
    rm -f "$T"/*.graph
    awk -v dir="$T" '
        /^ *```graph$/ { skip = prev ~ /<!-- fragment -->/; ind = index($0, "`") - 1
                         f = sprintf("%s/line_%d.graph", dir, NR); on = 1; next }
        on && /^ *```$/ { on = 0; next }
        on { if (!skip) print substr($0, ind + 1) > f; next }
        NF { prev = $0 }' "$md"
    for f in "$T"/line_*.graph; do
        [ -e "$f" ] || continue
        n=$((n + 1))
        line=${f##*/line_}
        if ! "$G" check "$f" > "$T/out.txt" 2>&1; then
            echo "FAIL: $md:${line%.graph}: this \`\`\`graph block does not compile" \
                 "(a fragment says <!-- fragment --> on the line before its fence):" >&2
            cat "$T/out.txt" >&2
            fail=1
        fi
    done
done
[ $n -gt 0 ] || { echo "FAIL: no \`\`\`graph block to compile in $*" >&2; exit 1; }
exit $fail
