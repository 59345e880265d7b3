#!/bin/bash
# layer_check.sh - the layers of src/ call and include only down.
#
# The layer of each src/ file is read from ARCHITECTURE.md's picture (the
# fenced block opened by ```layers): a row that starts in column one or
# two names
# a layer, every src/ file named on it or on the indented rows under it
# belongs to that layer, layers run from the top down.  The first row that
# names a file decides.  Headers of the format layer (the on-disk format and
# the core types) declare no functions: every file may include them.
#
# Edges:
#   calls     A.c -> B.c when A.o uses a symbol B.o defines (nm of the
#             build's obj/src/*.o: "U name" against a defined global);
#   includes  A -> B.h for each #include "B.h" in src/A.c or src/A.h.
# An edge goes up when B's layer is above A's.  Each one must be named in
# docs/layout.md's section "Calls that still go up", one line each:
#   - a.c, b.c → c.c: why
# (an exception for c.c covers an include of c.h too).  The check fails
# naming each up-edge not listed, each listed edge that no longer exists,
# and each src/*.c the picture does not place.  It prints the largest call
# cycle (the biggest strongly connected component of the call graph).
#
# Every run also proves that it can fail: it plants an up-call (an object
# of the lowest layer linked, ld -r, with a call to the top layer) and an
# upward #include in a temporary copy and expects both to be named.
#   tests/layer_check.sh                   check (objects of $UEXT4_BUILD)
#   tests/layer_check.sh --top DIR --obj DIR --no-selftest
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
SELF=$TOP/tests/layer_check.sh
BUILD=${UEXT4_BUILD:-$TOP/build}
case "$BUILD" in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
OBJ=$BUILD/obj/src
SELFTEST=1
while [ $# -gt 0 ]; do
	case "$1" in
	--top) TOP=$2; shift ;;
	--obj) OBJ=$2; shift ;;
	--no-selftest) SELFTEST=0 ;;
	*) echo "usage: $0 [--top DIR] [--obj DIR] [--no-selftest]"; exit 2 ;;
	esac
	shift
done
cd "$TOP" || exit 1
if ! ls "$OBJ"/*.o > /dev/null 2>&1; then
	echo "SKIP: no objects in $OBJ (build first)"
	exit 77
fi

# The facts, one tagged line each, for one awk:
#   L layer file...   a row of the picture (layer "-" continues the last)
#   X from to         an exception (from and to are file names)
#   N file type name  a symbol of an object
#   I file header     an include
facts() {
	awk '/^```layers/ { on = 1; next } on && /^```/ { exit }
	on && /^ *-----/ { next }
	on {
		layer = ($0 ~ /^ ?[^ ]/) ? $1 : "-"
		out = "L " layer
		n = split($0, w, /[^A-Za-z0-9_.]+/)
		for (i = 1; i <= n; i++) if (w[i] ~ /^[A-Za-z0-9_]+\.[ch]$/) out = out " " w[i]
		print out
	}' ARCHITECTURE.md
	awk '/^## Calls that still go up/ { on = 1; next } on && /^## / { exit }
	on && /^- / && /→/ {
		line = substr($0, 3); sub(/:.*/, "", line)
		split(line, side, /→/)
		nf = split(side[1], from, /[^A-Za-z0-9_.]+/)
		nt = split(side[2], to, /[^A-Za-z0-9_.]+/)
		for (i = 1; i <= nf; i++) for (j = 1; j <= nt; j++)
			if (from[i] ~ /\.[ch]$/ && to[j] ~ /\.[ch]$/) print "X", from[i], to[j]
	}' docs/layout.md
	nm -A "$OBJ"/*.o 2> /dev/null | awk '{
		f = $1; sub(/:.*/, "", f); sub(/.*\//, "", f); sub(/\.o$/, ".c", f)
		print "N", f, $(NF - 1), $NF
	}'
	for f in src/*.[ch]; do
		sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f" |
			while read -r h; do
				[ -f "src/$h" ] && echo "I ${f#src/} $h"
			done
	done
	for f in src/*.c; do echo "C ${f#src/}"; done
}

check() {
	facts | awk '
$1 == "L" {
	if ($2 != "-") { layer = $2; rank[layer] = ++nlayers; lname[nlayers] = layer }
	for (i = 3; i <= NF; i++) if (!($i in lay)) lay[$i] = layer
	next
}
$1 == "X" { exc[$2, $3] = 1; excorder[++nexc] = $2 SUBSEP $3; next }
$1 == "N" {
	if ($3 == "U") used[$2, $4] = 1
	else if ($3 ~ /^[A-TV-Z]$/) def[$4] = $2
	next
}
$1 == "I" { inc[$2, $3] = 1; next }
$1 == "C" { cfile[++ncfile] = $2; next }
function up(a, b) { return rank[lay[b]] < rank[lay[a]] }
function twin(f) { sub(/\.[ch]$/, ".c", f); return f }
# Tarjan: strongly connected components of the call graph.
function scc(v,   k, w, size, list) {
	idx[v] = low[v] = ++counter; stack[++sp] = v; onstack[v] = 1
	for (k = 1; k <= nout[v]; k++) {
		w = out[v, k]
		if (!(w in idx)) { scc(w); if (low[w] < low[v]) low[v] = low[w] }
		else if (onstack[w] && idx[w] < low[v]) low[v] = idx[w]
	}
	if (low[v] != idx[v]) return
	size = 0; list = ""
	do { w = stack[sp--]; onstack[w] = 0; size++; list = w " " list } while (w != v)
	if (size > 1) ncycles++
	if (size > best) { best = size; bestlist = list }
}
END {
	fail = 0
	for (i = 1; i <= ncfile; i++) if (!(cfile[i] in lay)) {
		printf "layer_check: src/%s has no layer in ARCHITECTURE.md (add it to the picture)\n", cfile[i]
		fail = 1
	}
	for (k in used) {
		split(k, p, SUBSEP); a = p[1]; s = p[2]
		if (!(s in def) || def[s] == a) continue
		b = def[s]
		if (!((a, b) in call)) { call[a, b] = s; ncalls++; out[a, ++nout[a]] = b; node[a]; node[b] }
		else if (length(call[a, b]) < 200) call[a, b] = call[a, b] ", " s
	}
	nup = 0
	for (k in call) {
		split(k, p, SUBSEP); a = p[1]; b = p[2]
		if (!(a in lay) || !(b in lay) || !up(a, b)) continue
		nup++; seen[a, b] = 1
		if ((a, b) in exc) continue
		printf "layer_check: up-call %s (%s) → %s (%s): %s\n", a, lay[a], b, lay[b], call[k]
		fail = 1
	}
	nincup = 0
	for (k in inc) {
		split(k, p, SUBSEP); a = p[1]; h = p[2]
		if (!(a in lay) || !(h in lay) || lay[h] == "format" || !up(a, h)) continue
		nincup++; seen[twin(a), twin(h)] = 1; seen[twin(a), h] = 1
		if ((twin(a), twin(h)) in exc || (twin(a), h) in exc) continue
		printf "layer_check: upward include: %s (%s) includes %s (%s)\n", a, lay[a], h, lay[h]
		fail = 1
	}
	for (i = 1; i <= nexc; i++) if (!(excorder[i] in seen)) {
		split(excorder[i], p, SUBSEP)
		printf "layer_check: docs/layout.md excepts %s → %s, which no longer goes up: delete it\n", p[1], p[2]
		fail = 1
	}
	for (v in node) if (!(v in idx)) scc(v)
	printf "layer_check: %d call edges between files, %d up; %d upward includes; %d edges excepted\n", ncalls, nup, nincup, nexc
	printf "layer_check: largest call cycle: %d files (%d cycles): %s\n", best, ncycles, bestlist
	exit fail
}'
}

# selftest: plant an up-call and an upward include in a copy; the check
# must name both.
selftest() {
	local tmp low high sym hdr out rc
	tmp=$(mktemp -d) || return 1
	trap 'rm -rf "$tmp"' RETURN
	mkdir -p "$tmp/src" "$tmp/docs" "$tmp/obj"
	cp ARCHITECTURE.md "$tmp/"
	cp docs/layout.md "$tmp/docs/"
	cp src/*.[ch] "$tmp/src/"
	ln -s "$OBJ"/*.o "$tmp/obj/"
	# the first .c of the bottom layer, the first .c and .h of the top one
	read -r low high hdr < <(facts | awk '$1 == "L" {
		if ($2 != "-") layer = $2
		for (i = 3; i <= NF; i++) if (system("test -f src/" $i) == 0) {
			if ($i ~ /\.c$/ && !(layer in c)) c[layer] = $i
			if ($i ~ /\.h$/ && !(layer in h)) h[layer] = $i
			if (first == "") first = layer
			last = layer
		}
	} END { print c[last], c[first], h[first] }')
	sym=$(nm --defined-only "$OBJ/${high%.c}.o" | awk '$2 == "T" { print $3; exit }')
	if [ -z "$low" ] || [ -z "$sym" ] || [ -z "$hdr" ]; then
		echo "layer_check: selftest found nothing to plant"
		return 1
	fi
	printf 'void layer_check_planted(void);\nvoid %s(void);\nvoid layer_check_planted(void) { %s(); }\n' \
		"$sym" "$sym" | cc -c -x c - -o "$tmp/planted.o" || return 1
	rm "$tmp/obj/${low%.c}.o"
	ld -r "$OBJ/${low%.c}.o" "$tmp/planted.o" -o "$tmp/obj/${low%.c}.o" || return 1
	echo "#include \"$hdr\"" >> "$tmp/src/$low"
	out=$("$SELF" --top "$tmp" --obj "$tmp/obj" --no-selftest 2>&1)
	rc=$?
	if [ $rc -ne 1 ] || ! grep -q "up-call $low .*→ $high .*$sym" <<< "$out" ||
		! grep -q "upward include: $low .*includes $hdr" <<< "$out"; then
		echo "layer_check: selftest: a planted call $low → $sym() ($high) and #include \"$hdr\" in $low were not both caught (exit $rc):"
		echo "$out"
		return 1
	fi
	echo "layer_check: selftest: a planted call $low → $sym() ($high) and #include \"$hdr\" in $low are caught"
}

check
rc=$?
if [ $SELFTEST = 1 ]; then
	selftest || rc=1
fi
exit $rc
