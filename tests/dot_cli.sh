#!/bin/sh
# dot_cli.sh GRAPHRUN SRCDIR - the graph pictures and the plan's transfers:
# `graphrun dot` of every examples/*.graph and tests/models/*.graph (and of
# the two towers on two CPUs, and on a CPU and a simulated GPU) renders
# with Graphviz (dot -Tsvg); edges that cross devices, and only those, are
# drawn red; and `check --emit plan` lists each transfer with its bytes per
# step, which add up to the total it prints.
set -u
G=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
TOWERS=$SRC/examples/two_towers.graph

render() { # NAME ARGS...: graphrun dot ARGS > NAME.dot, rendered to NAME.svg
    name=$1
    shift
    "$G" dot "$@" > "$T/$name.dot" || fail "graphrun dot $*"
    # a graph of a thousand nodes (the char GPT) takes Graphviz minutes to
    # lay out: it is only parsed (gc, Graphviz's counter), which catches any
    # syntax error
    if [ "$(wc -l < "$T/$name.dot")" -gt 1500 ]; then
        gc -n "$T/$name.dot" > /dev/null 2> "$T/dot.err" && [ ! -s "$T/dot.err" ] ||
            fail "gc of graphrun dot $*: $(cat "$T/dot.err")"
        return
    fi
    dot -Tsvg "$T/$name.dot" -o "$T/$name.svg" 2> "$T/dot.err" && [ ! -s "$T/dot.err" ] ||
        fail "dot -Tsvg of graphrun dot $*: $(cat "$T/dot.err")"
}

for f in "$SRC"/examples/*.graph "$SRC"/tests/models/*.graph; do
    render "$(basename "$f" .graph)" "$f"
done
render towers --devices cpu:0-1 "$TOWERS"
render towers_gpu --devices cpu:0,sim:0 "$SRC/bench/gpu/towers_gpu_cpu.graph"
grep -q 'label="gpu:0"' "$T/towers_gpu.dot" && grep -q 'color=red' "$T/towers_gpu.dot" ||
    fail "no gpu:0 cluster or transfer in the CPU + GPU towers"
[ "$(grep -c 'color=red' "$T/linear_regression.dot")" -eq 0 ] || fail "red edges on one device"
grep -q 'stroke="red"' "$T/towers.svg" || fail "no red transfer edge in the SVG"

# every edge between the clusters is red, and no other: the cluster of each
# node from the dot file, then each edge checked
awk '/subgraph cluster_/ { c = $2 } /^    n[0-9]+ \[/ { print $1, c }' "$T/towers.dot" > "$T/where"
awk 'NR == FNR { at[$1] = $2; next }
     /^  n[0-9]+ -> n[0-9]+/ {
         dst = $3; sub(/;$/, "", dst)
         cross = at[$1] != at[dst]; red = index($0, "color=red") > 0
         if (cross != red) { print "edge", $1, "->", dst, "cross", cross, "red", red; bad = 1 }
         n += cross
     }
     END { if (!n) print "no edge crosses devices"; exit bad || !n }' "$T/where" "$T/towers.dot" ||
    fail "red edges are not exactly the transfers"
grep -q 'label="200704 bytes/step"' "$T/towers.dot" || fail "the batch transfer has no bytes label"

# names as well as ops (loss and accuracy are both a mean f32[]); no
# constant that nothing reads; a legend for the kinds of edges drawn
grep -qF 'label="loss\nmean f32[]"' "$T/fashion_mlp.dot" &&
    grep -qF 'label="accuracy\nmean f32[]"' "$T/fashion_mlp.dot" || fail "loss and accuracy are not named"
awk '/^    n[0-9]+ \[label="const/ { c[$1] = 1 } /^  n[0-9]+ -> / { used[$1] = 1 }
     END { for (n in c) if (!used[n]) { print "unread constant", n; bad = 1 }; exit bad }' \
    "$T/fashion_mlp.dot" || fail "constants nothing reads are drawn"
grep -q 'label="control: runs after"' "$T/fashion_mlp.dot" || fail "no legend for control edges"
grep -q 'lg4 -> lg5 .*label="transfer between devices, bytes/step"' "$T/towers.dot" ||
    fail "no legend for transfers"
! grep -q 'lg4 -> lg5' "$T/linear_regression.dot" || fail "a transfer legend without transfers"

# the plan: a line per transfer with its bytes per step; they add up
"$G" check --emit plan --devices cpu:0-1 --target train "$TOWERS" > "$T/plan.txt" || fail "plan"
awk '/^  send / { for (i = 1; i <= NF; i++) if ($(i + 1) == "bytes/step,") sum += $i; n++
                  dirs[$5 $6 $7] = 1 }
     /^transfers: / { total = $3; count = $2 + 0 }
     END { d = 0; for (k in dirs) d++
           exit !(n > 0 && count == n && sum == total && d == 2) }' "$T/plan.txt" ||
    fail "transfer lines and their total disagree: $(grep -e send -e transfers "$T/plan.txt")"
exit 0
