#!/bin/sh
# docs_numbers.sh GRAPHRUN ROOT - the figures README.md and docs/ quote from
# graphrun's own output are what it prints today (issue 28: two had gone
# stale).  Each check runs the command the text names and looks for the
# figure, as the text writes it, in that file; a change to the memory plan
# or to placement that moves a figure fails here until the text follows.
set -u
G=$1 ROOT=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$ROOT" || fail "no $ROOT"

# quoted FILE TEXT: FILE holds TEXT (one line of it, after joining lines)
quoted() {
    tr '\n' ' ' < "$1" | tr -s ' ' | grep -qF -- "$2" || fail "$1 does not say '$2' (graphrun prints it now)"
}
# arena FILE...: "arena: A bytes (B without reuse)" of a plan
arena() { timeout 60 "$G" check --emit plan "$@" 2> /dev/null | sed -n 's/^arena: \([0-9]*\) bytes (\([0-9]*\) without reuse)$/\1 \2/p' | head -1; }
# mib BYTES: whole MiB, rounded
mib() { echo $((($1 + 524288) / 1048576)); }

# README.md: the character GPT's arena, with and without reuse.
set -- $(arena examples/char_gpt.graph)
[ $# -eq 2 ] || fail "no arena line for examples/char_gpt.graph"
quoted README.md "reports an arena of $(mib "$1") MiB where the same tensors without reuse would take $(mib "$2") MiB"

# docs/architecture.md: the MLP's arena once the weight gradient is fused
# into its update, to a tenth of a MB.
set -- $(arena examples/fashion_mlp.graph)
[ $# -eq 2 ] || fail "no arena line for examples/fashion_mlp.graph"
mb=$(awk "BEGIN { printf \"%.1f\", $1 / 1e6 }")
quoted docs/architecture.md "the MLP's arena is $mb MB per executor"

# docs/curves.md: the two towers' transfers; every send line it quotes (up
# to its arena offsets, written [...)) and the total.
timeout 60 "$G" check --emit plan --devices cpu:0-1 examples/two_towers.graph > "$T/plan" 2> /dev/null ||
    fail "check --emit plan of examples/two_towers.graph failed"
total=$(grep '^transfers: ' "$T/plan" | head -1)
[ -n "$total" ] || fail "the plan has no transfers line"
quoted docs/curves.md "$total"
sed -n '/^```$/,/^```$/p' docs/curves.md | grep '^  send %' | sed 's/recv arena\[\.\.\.)$//' > "$T/quoted"
[ -s "$T/quoted" ] || fail "docs/curves.md quotes no send line"
while IFS= read -r line; do
    grep -qF -- "$line" "$T/plan" || fail "docs/curves.md quotes '$line', not in the plan"
done < "$T/quoted"
echo "ok: README.md, docs/architecture.md and docs/curves.md quote today's figures"
