#!/bin/sh
# help_cli.sh GRAPHRUN SRC - the command line helps (docs/cli.md):
# exact option names only (a prefix is refused with the option it may
# mean), a usage error is one line with a pointer to --help and exit 2, a
# mistyped command is not taken for a model file, the exit-status rule,
# the man page lists every option --help does, the completion script
# completes commands, options and the names of the .graph file on the
# line, and --version tells how graphrun was built.
set -u
G=$1 SRC=$2
M=$SRC/examples/linear_regression.graph
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# refused STATUS MESSAGE ARGS...: graphrun ARGS exits STATUS, its stderr is
# one line and holds MESSAGE (a fixed string).
refused() {
    want=$1 msg=$2
    shift 2
    "$G" "$@" > "$T/out.txt" 2> "$T/err.txt"
    rc=$?
    [ $rc -eq "$want" ] || fail "graphrun $*: exit $rc, expected $want: $(cat "$T/err.txt")"
    grep -qF -- "$msg" "$T/err.txt" || fail "graphrun $*: said '$(cat "$T/err.txt")', expected '$msg'"
    [ "$want" -ne 2 ] || [ "$(wc -l < "$T/err.txt")" -eq 1 ] ||
        fail "graphrun $*: a usage error takes one line, got $(wc -l < "$T/err.txt"): $(cat "$T/err.txt")"
}

# An unknown option: one line, a pointer to --help, 2 (it was 44 lines).
refused 2 "unknown option '--stpes'; did you mean '--steps'? (graphrun FILE --help lists the options)" "$M" --stpes 5
# No abbreviations: --step would have trained; now it names the option.
refused 2 "unknown option '--step'; did you mean '--steps'?" "$M" --step 1
refused 2 "did you mean '--steps'?" "$M" --step=1
refused 2 "unknown option '--lo'; did you mean '--locking', '--log' or '--log-every'?" "$M" --steps 1 --lo x
refused 2 "graphrun check: unknown option '--emitt'; did you mean '--emit'? (graphrun check --help" \
    check --emitt ir "$M"
refused 2 "graphrun fmt: unknown option '--chec'; did you mean '--check'?" fmt --chec "$M"
refused 2 "graphrun plot: unknown option '--smoo'; did you mean '--smooth'?" plot --smoo 0.5 x.jsonl
refused 2 "graphrun inspect: unknown option '--js'; did you mean '--json'?" inspect --js x.safetensors
refused 2 "graphrun: --steps needs a value" "$M" --steps
refused 2 "graphrun: --quiet takes no value (graphrun FILE --help" "$M" --steps 1 --quiet=1
refused 2 "graphrun fmt: unknown option '-x'" fmt -x "$M"
refused 2 "graphrun: --steps N is required (graphrun FILE --help" "$M"
refused 2 "graphrun: --set needs NAME=VALUE, got lr" "$M" --steps 1 --set lr
refused 2 "graphrun: unknown option '--verison'" --verison
# A mistyped command is not a model file to train.
refused 2 "graphrun: unknown command 'chec'; did you mean 'check'?" chec "$M"
refused 2 "graphrun: unknown command 'chekc'; did you mean 'check'? (graphrun --help lists the commands" chekc "$M"
refused 2 "unknown shell 'fish'" completion fish

# The exit-status rule: a file named on the command line that cannot be
# read, and a name the model lacks, are usage (2) in every command; a
# model that does not compile is 1.
refused 2 "nosuch.graph" "$T/nosuch.graph" --steps 1
refused 2 "nosuch.graph" check "$T/nosuch.graph"
refused 2 "nosuch.graph" dot "$T/nosuch.graph"
refused 2 "nosuch.graph" fmt "$T/nosuch.graph"
"$G" "$M" --steps 1 --target trian > /dev/null 2> "$T/err.txt"
[ $? -eq 2 ] && grep -q "no target named 'trian'; did you mean 'train'?" "$T/err.txt" ||
    fail "--target trian: $(cat "$T/err.txt")"
"$G" "$M" --steps 1 --eval lo > /dev/null 2> "$T/err.txt"
[ $? -eq 2 ] && grep -q "no target named 'lo'; did you mean 'loss'?" "$T/err.txt" ||
    fail "--eval lo: $(cat "$T/err.txt")"
"$G" check --emit plan --target trian "$M" > /dev/null 2> "$T/err.txt"
[ $? -eq 2 ] && grep -q "did you mean 'train'?" "$T/err.txt" || fail "check --target trian: $(cat "$T/err.txt")"
printf 'param lr = 0.1\nx = [1.0] * lr\n' > "$T/lr.graph"
"$G" check --set lrr=1 "$T/lr.graph" > /dev/null 2> "$T/err.txt"
[ $? -eq 1 ] && grep -q "no param named 'lrr'; did you mean 'lr'?" "$T/err.txt" ||
    fail "--set lrr: $(cat "$T/err.txt")"
printf 'x = [1.0, 2.0]\ny = x @ z\n' > "$T/bad.graph"
"$G" "$T/bad.graph" --steps 1 > /dev/null 2>&1
[ $? -eq 1 ] || fail "a model with an error must exit 1 when training"
"$G" check "$T/bad.graph" > /dev/null 2>&1
[ $? -eq 1 ] || fail "a model with an error must exit 1 in check"
"$G" --help | grep -q "^Exit status: 0 done; 1 a problem with the model" || fail "--help states the exit rule"

# --help of every command, and the man page made from the same tables:
# every option --help shows is in the page.
"$G" man > "$T/graphrun.1" || fail "graphrun man"
head -n 1 "$T/graphrun.1" | grep -q '^\.TH GRAPHRUN 1 ' || fail "man: no .TH line"
sed 's/\\-/-/g; s/\\f[BIR]//g' "$T/graphrun.1" > "$T/man.txt"
n=0
for cmd in "$M" check dot fmt inspect plot launch completion man; do
    "$G" $cmd --help > "$T/help.txt" || fail "graphrun $cmd --help"
    for opt in $(grep -o -- '--[a-z][a-z-]*' "$T/help.txt" | sort -u); do
        grep -q -- "$opt\b" "$T/man.txt" || fail "man page lacks $opt (in graphrun $cmd --help)"
        n=$((n + 1))
    done
done
[ $n -gt 40 ] || fail "only $n options found in the --help texts"
grep -q -- '--checkpoint-every K' "$T/man.txt" || fail "man: --checkpoint-every K"
if command -v groff > /dev/null; then
    groff -man -Tutf8 -ww -z "$T/graphrun.1" 2> "$T/groff.txt"
    [ ! -s "$T/groff.txt" ] || fail "groff warns: $(cat "$T/groff.txt")"
fi

# Completion: commands, options, files, and the file's targets and params.
"$G" completion bash > "$T/c.bash" || fail "graphrun completion bash"
bash -n "$T/c.bash" || fail "the bash completion does not parse"
# complete WORDS...: COMPREPLY for the last word, one a line
complete_words() {
    bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _graphrun
             printf "%s\n" "${COMPREPLY[@]}"' sh "$T/c.bash" "$@"
}
complete_words graphrun ch | grep -qx check || fail "completion: ch -> check"
complete_words graphrun "$M" --ste | grep -qx -- --steps || fail "completion: --ste -> --steps"
complete_words graphrun "$M" --steps 5 --target "" | grep -qx train || fail "completion: --target"
complete_words graphrun "$M" --eval lo | grep -qx loss || fail "completion: --eval lo -> loss"
complete_words graphrun check --emit "" | grep -qx plan || fail "completion: --emit"
complete_words graphrun launch --dr | grep -qx -- --dry-run || fail "completion: launch --dr"
complete_words graphrun launch -np 2 "$M" --ste | grep -qx -- --steps || fail "completion: launch FILE --ste"
printf 'param lr = 0.1\nparam batch = 8\nx = [1.0]\n' > "$T/p.graph"
complete_words graphrun "$T/p.graph" --set "" | grep -qx 'lr=' || fail "completion: --set"
(cd "$SRC/examples" && complete_words graphrun fashion_m) | grep -qx fashion_mlp.graph ||
    fail "completion: .graph files"
"$G" completion zsh > "$T/c.zsh" || fail "graphrun completion zsh"
grep -q bashcompinit "$T/c.zsh" || fail "zsh completion"
if command -v zsh > /dev/null; then zsh -n "$T/c.zsh" || fail "the zsh completion does not parse"; fi

# --version: the build.
"$G" --version > "$T/v.txt" || fail "--version"
for k in '^graphrun [0-9]' '^devices: cpu' '^BLAS: OpenBLAS kernels: [A-Za-z0-9]' '^CUDA: (yes|no)' '^MPI: (yes|no)'; do
    grep -Eq "$k" "$T/v.txt" || fail "--version lacks $k: $(cat "$T/v.txt")"
done
echo "ok: $n options, completion, man page, exit codes"
