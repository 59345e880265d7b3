#!/bin/bash
# include_check.sh - every #include "..." is needed, and the frontends use
# only the public API.
#
# For each C file (src/, tests/, fuzz/, fuse/, cli/, bench/) and each project
# header it includes with #include "...", the file must use at least one
# identifier that the header itself declares: a function, a macro, a
# struct/enum/union defined there (by its tag, "struct buf"), an enum
# constant, a typedef or an extern variable.  Comments are stripped first
# (gcc -fpreprocessed), so a name in a comment is no use.  What a header
# gets from the headers it includes does not count for it.  A forward
# declaration (struct inode;) declares nothing.
# Also: fuse/, cli/ and bench/ include no header of src/ (include/uext4.h
# only).
#
# Fails naming the file and the header.  One gcc and one awk: about a
# second.
#   tests/include_check.sh              check
#   tests/include_check.sh --needed F   print the src/ headers F uses
#                                       (a helper for moving declarations)
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP" || exit 1

FILES=$(ls src/*.[ch] include/*.h tests/*.[ch] fuzz/*.[ch] fuse/*.[ch] cli/*.[ch] bench/*.[ch] 2>/dev/null)
NEEDED=
if [ "${1:-}" = --needed ]; then
	NEEDED=$2
fi

# All files through one gcc (comments stripped, directives kept), each
# after a marker line; then one awk does the rest.
for f in $FILES; do
	printf '\n@@FILE %s\n' "$f"
	cat "$f"
done | gcc -fpreprocessed -dD -E -P -x c - 2>/dev/null | awk -v needed="$NEEDED" '
function last_ident(s,   n, a) {
	n = split(s, a, /[^A-Za-z0-9_]+/)
	while (n > 0 && a[n] == "") n--
	return n ? a[n] : ""
}
# "struct buf" -> "struct_buf": a variable named buf is no use of struct buf.
function tag_tokens(s,   out, m, pre, kw) {
	out = ""
	while (match(s, /(struct|enum|union)[ \t]+[A-Za-z_]/)) {
		pre = substr(s, 1, RSTART - 1); m = substr(s, RSTART, RLENGTH)
		s = substr(s, RSTART + RLENGTH)
		if (pre ~ /[A-Za-z0-9_]$/) { out = out pre m; continue }
		kw = m; sub(/[ \t].*/, "", kw)
		out = out pre kw "_" substr(m, length(m), 1)
	}
	return out s
}
function declare(f, name) { if (name != "") decl[f, name] = 1; ndecl[f]++ }
# "a/b/../c" -> "a/c", "./x" -> "x"
function normpath(p,   n, a, i, out, k) {
	n = split(p, a, "/"); k = 0
	for (i = 1; i <= n; i++) {
		if (a[i] == "." || a[i] == "") continue
		if (a[i] == ".." && k > 0 && st[k] != "..") { k--; continue }
		st[++k] = a[i]
	}
	out = ""
	for (i = 1; i <= k; i++) out = out (i > 1 ? "/" : "") st[i]
	return out
}
function dirof(f) { return f ~ /\// ? substr(f, 1, match(f, /\/[^\/]*$/) - 1) : "." }
function resolve(f, name,   c) {
	c = normpath(dirof(f) "/" name); if (c in isfile) return c
	c = normpath("src/" name); if (c in isfile) return c
	c = normpath("include/" name); if (c in isfile) return c
	return ""
}
/^@@FILE / { cur = $2; isfile[cur] = 1; order[++nf] = cur; inenum = 0; next }
{ line = tag_tokens($0) }
# #include "name": remember it, it is no use of anything.
line ~ /^[ \t]*#[ \t]*include[ \t]+"/ {
	n = line; sub(/^[^"]*"/, "", n); sub(/".*/, "", n)
	inc[cur, ++ninc[cur]] = n
	next
}
# A forward declaration (struct inode;): used through pointers only.
line ~ /^[ \t]*(struct|union)_[A-Za-z0-9_]+[ \t]*;/ {
	n = line; sub(/^[ \t]*/, "", n); sub(/[ \t]*;.*/, "", n)
	fwd[cur, n] = 1
	next
}
{
	# uses: every identifier
	rest = line
	while (match(rest, /[A-Za-z_][A-Za-z0-9_]*/)) {
		use[cur, substr(rest, RSTART, RLENGTH)] = 1
		rest = substr(rest, RSTART + RLENGTH)
	}
}
cur !~ /\.h$/ { next }
# declarations of a header
line ~ /^[ \t]*#[ \t]*define[ \t]/ {
	n = line; sub(/^[ \t]*#[ \t]*define[ \t]+/, "", n); sub(/[^A-Za-z0-9_].*/, "", n)
	if (n !~ /^UEXT4_.*_H$/) declare(cur, n)
	next
}
line ~ /^#/ { next }
inenum && line ~ /^[ \t]+[A-Z_][A-Z0-9_]*[ \t]*(=|,|$)/ {
	n = line; sub(/^[ \t]+/, "", n); sub(/[^A-Z0-9_].*/, "", n); declare(cur, n)
}
inenum && line ~ /}/ { inenum = 0 }
line ~ /(struct|enum|union)_[A-Za-z0-9_]+[ \t]*\{/ {
	n = line; sub(/[ \t]*\{.*/, "", n); declare(cur, last_ident(n))
}
line ~ /(^|[^A-Za-z0-9_])enum(_[A-Za-z0-9_]+)?[ \t]*\{/ && line !~ /}/ { inenum = 1 }
line ~ /^typedef/ && line ~ /\(\*[A-Za-z_][A-Za-z0-9_]*\)/ {
	n = line; sub(/^[^(]*\(\*/, "", n); sub(/\).*/, "", n); declare(cur, n); next
}
line ~ /^typedef/ || line ~ /^}[ \t]*[A-Za-z_][A-Za-z0-9_]*[ \t]*;/ || line ~ /^extern[ \t]/ {
	n = line; sub(/[ \t]*(\[[^]]*\])?[ \t]*;.*/, "", n); declare(cur, last_ident(n)); next
}
line ~ /^_Static_assert/ { next }
{ gsub(/__attribute__[ \t]*\(\([^()]*(\([^()]*\))?[^()]*\)\)/, "", line) }
line ~ /^[A-Za-z_]/ && line ~ /\(/ {
	n = line; sub(/[ \t]*\(.*/, "", n); declare(cur, last_ident(n))
}
function uses_any(f, h,   k, parts) {
	for (k in decl) {
		split(k, parts, SUBSEP)
		if (parts[1] == h && ((f, parts[2]) in use) && !((f, parts[2]) in fwd)) return 1
	}
	return 0
}
END {
	if (needed != "") {
		for (i = 1; i <= nf; i++) {
			h = order[i]
			if (h ~ /^src\/.*\.h$/ && h != needed && uses_any(needed, h)) print substr(h, 5)
		}
		exit 0
	}
	fail = 0; pairs = 0
	for (i = 1; i <= nf; i++) {
		f = order[i]
		if (f ~ /^include\//) continue
		for (j = 1; j <= ninc[f]; j++) {
			h = resolve(f, inc[f, j])
			if (h == "" || h !~ /\.h$/) continue
			pairs++
			if (f ~ /^(fuse|cli|bench)\// && h ~ /^src\//) {
				printf "include_check: %s includes %s: a frontend may use only include/uext4.h\n", f, h
				fail = 1
			} else if (!ndecl[h]) {
				printf "include_check: found no declaration in %s (a form the extractor misses?)\n", h
				fail = 1
			} else if (!uses_any(f, h)) {
				printf "include_check: %s includes %s but uses nothing it declares\n", f, h
				fail = 1
			}
		}
	}
	printf "include_check: %d includes in %d files checked\n", pairs, nf
	exit fail
}'
