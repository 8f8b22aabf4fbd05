#!/bin/sh
# api_exports.sh NM HEADER SHARED_LIB STATIC_LIB - both libraries export
# exactly the functions HEADER declares: every gr_* declared is defined and
# global, and nothing else is (no internal gr_ tables or helpers, no names
# without the prefix).  The expected list is read from the header each run,
# so adding a declaration or an exported symbol cannot go unnoticed.  The
# shared library's symbols must also carry the version node GRAPHRUN_<MAJOR>
# (cmake/graphrun.map), MAJOR being the header's GR_VERSION_MAJOR.
set -u
NM=$1 HEADER=$2 SHARED=$3 STATIC=$4
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# Declared: identifiers gr_* followed by "(" once comments are gone (the
# header's tutorial and notes call functions too; a typedef of a function
# pointer reads "(*gr_name)(" and is not matched).
api_declared() {
    awk '{
        line = $0; out = ""
        while (line != "") {
            if (incomment) {
                i = index(line, "*/")
                if (!i) { line = ""; break }
                line = substr(line, i + 2); incomment = 0
            } else {
                i = index(line, "/*"); j = index(line, "//")
                if (j && (!i || j < i)) { out = out substr(line, 1, j - 1); line = ""; break }
                if (!i) { out = out line; line = ""; break }
                out = out substr(line, 1, i - 1); line = substr(line, i + 2); incomment = 1
            }
        }
        print out
    }' "$1" | grep -o 'gr_[A-Za-z0-9_]*[[:space:]]*(' | sed 's/[[:space:]]*($//' | sort -u
}

# Defined and global: "ADDRESS TYPE NAME" rows with an upper-case type (nm
# on an archive also prints member names and blank lines), less a version
# node's own absolute symbol (type A) and a name's @@VERSION.
lib_exported() {
    awk 'NF == 3 && $2 ~ /^[A-Z]$/ && $2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u
}

api_declared "$HEADER" >"$tmp/declared"
"$NM" -D --defined-only "$SHARED" | lib_exported >"$tmp/shared" || exit 1
"$NM" -g --defined-only "$STATIC" | lib_exported >"$tmp/static" || exit 1

if [ "$(wc -l <"$tmp/declared")" -lt 10 ]; then
    echo "api_exports: found only $(wc -l <"$tmp/declared") declarations in $HEADER"
    exit 1
fi
rc=0
major=$(sed -n 's/^#define GR_VERSION_MAJOR  *\([0-9]*\)$/\1/p' "$HEADER")
unversioned=$("$NM" -D --defined-only "$SHARED" |
    awk -v v="GRAPHRUN_$major" 'NF == 3 && $2 ~ /^[A-Z]$/ && $2 != "A" && $3 !~ ("@@" v "$")')
if [ -z "$major" ] || [ -n "$unversioned" ]; then
    echo "shared library symbols without the version node GRAPHRUN_${major:-?}:"
    echo "$unversioned"
    rc=1
fi
for lib in shared static; do
    comm -23 "$tmp/declared" "$tmp/$lib" | sed "s/^/$lib library lacks declared /"
    comm -13 "$tmp/declared" "$tmp/$lib" | sed "s/^/$lib library exports undeclared /"
    cmp -s "$tmp/declared" "$tmp/$lib" || rc=1
done
[ $rc -eq 0 ] && echo "both libraries export the $(wc -l <"$tmp/declared") functions of $HEADER"
exit $rc
