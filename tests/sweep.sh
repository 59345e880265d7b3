#!/bin/bash
# sweep.sh - the write-path sweep: every write command on a fresh
# copy of every damaged or unusual image, then `uext4 recover`, and e2fsck's
# findings before and after compared by kind.
# test-timeout: 900
#
# Images: the damaged image of each case of tests/corrupt.sh (run with
# SWEEP_SAVE=DIR, without its write probes and FUSE checks, with this
# build's binary; its own verdict is printed but belongs to corrupt.sh),
# and one image per builder tests/images/mk_*.sh found at run time (a
# builder that exits 77 is skipped; any other failure fails the sweep).
#
# Commands (columns), each on its own copy of the image:
#   md  mkdir /sweep_dir            mds mkdir DIR/sweep_dir
#   put put a 200 KiB file          pts put a 5000-byte file into DIR
#   ptr put a small tree            sx  setfattr -h trusted.sweep on NODE
#   sxb setfattr 3000 bytes on REG  tr  truncate -s 1 REG
#   rm  rm -r NODE                  rmd rm -r DIR
#   mv  mv NODE /sweep_moved        ln  ln NONDIR /sweep_link
#   sl  ln -s (a 100-byte target)   chm chmod 600 NODE
#   cho chown -h 123:456 NODE       fus FUSE mount, a small write workload
#   rec recover alone (its U/W: the image as it was, or not)
# (fus only with /dev/fuse and fusermount3.)
# NODE, REG, NONDIR and DIR are the image's damaged objects where they can
# be told: absolute paths named in the image's description, then the inodes
# e2fsck -fn names (found by debugfs ncheck), then the first entries of the
# root directory of the right type.
#
# A cell's verdict (every command is followed by `uext4 recover`, then
# e2fsck -fn; "same" below means: equal, after recovery, to the image after
# `recover` alone, outside the superblock's mount, write and error fields
# and the journal's blocks; for a refusal (exit != 0) it means stricter:
# byte for byte the image it was given, before recover, but for the
# superblock's error record (SB_ERROR), where recover alone leaves the
# image as it was (no replay or orphan cleanup), unless SWEEP_STRICT=0):
#   U   exit 0, same                     R   refused (exit != 0, a message), same
#   r   refused, undone: the same file system after recovery (relaxed rule)
#       but not the same bytes (the undo's restored blocks were committed)
#   W   exit 0, written, e2fsck clean    w   exit 0, written, e2fsck finds
#                                            only kinds it found before
#   P   refused part way through a command of several operations (put,
#       pts, ptr, rmd, fus, rm of a directory) after the first one: the
#       earlier ones are done
#   X!  e2fsck finds a kind of problem it did not find before
#   C!  refused, but the image is not the same (one operation: it must be
#       all or nothing)
#   M!  refused without a message        K!  crash (signal, sanitizer report)
#   H!  hang (30 s)                      -   not run
# Any "!" cell fails the test.  A kind is an e2fsck message with numbers,
# quoted names and paths replaced (so "Inode 12 has ..." and "Inode 40 has
# ..." are one kind), its prompt ("Fix? no") dropped; each item of a bitmap
# differences list is a kind by its sign (+: in use but marked free, -:
# marked in use but free); free-count lines are kinds like any other.
#
# Environment: SWEEP_IMAGES="GLOB..." (image names: corrupt-NN, mk_NAME),
# SWEEP_CMDS="md rm ..." (columns), SWEEP_SAMPLE=N (N images at random;
# the default: a fifth of them, a tenth under the sanitizers, all with
# UEXT4_LONG=1), SWEEP_SEED (for the sample),
# SWEEP_KEEP=DIR (keep every failing cell's image there),
# SWEEP_NO_CORRUPT=1 (builders only), SWEEP_STRICT=0 (the old relaxed rule
# for refusals, below; by default a refusal must leave every byte as it
# was, the superblock's mount fields and the journal too: cmp before
# recover, allowing only the error record of fs_error(), SB_ERROR).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
STRICT=${SWEEP_STRICT:-1}
setup_traps
need mke2fs debugfs e2fsck dumpe2fs cmp timeout
[ -x "$UEXT4" ] || skip "$UEXT4 not built"
export LC_ALL=C TZ=UTC

# On a tmpfs when there is one: the commands' fsyncs cost nothing there.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
	W=$(TMPDIR=/dev/shm mktemp_dir)
else
	W=$(mktemp_dir)
fi
TMPDIRS+=("$W")   # mktemp_dir ran in a subshell: register it here
mkdir -p "$W/img" "$W/host"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$W/san:detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$W/san:print_stacktrace=1"

ALL_CMDS="md mds put pts ptr sx sxb tr rm rmd mv ln sl chm cho fus rec"
CMDS=${SWEEP_CMDS:-$ALL_CMDS}
for c in $CMDS; do
	case " $ALL_CMDS " in *" $c "*) ;; *) fail "SWEEP_CMDS: unknown command '$c' (one of: $ALL_CMDS)" ;; esac
done
FUSE=1
if [ ! -e /dev/fuse ] || ! command -v fusermount3 > /dev/null; then
	FUSE=0
	echo "note: no /dev/fuse or fusermount3: the fus column is not run"
fi

# ---- host files the commands copy in ------------------------------------
H=$W/host
head -c 204800 /dev/urandom > "$H/file"
head -c 5000 /dev/urandom > "$H/small"
mkdir -p "$H/tree/a/b" "$H/tree/c"
for i in $(seq 1 20); do echo "file $i" > "$H/tree/a/f$i"; done
head -c 70000 /dev/urandom > "$H/tree/a/b/data"
truncate -s 3M "$H/tree/c/sparse"
echo tail >> "$H/tree/c/sparse"
ln -s ../a/f1 "$H/tree/c/link"
ln "$H/tree/a/f2" "$H/tree/c/hard"
command -v setfattr > /dev/null && setfattr -n user.sweep -v tree "$H/tree/a/f3" 2> /dev/null
BIGVAL=$(head -c 3000 /dev/zero | tr '\0' v)
LONGTARGET=/sweep/$(head -c 94 /dev/zero | tr '\0' t)

# ---- the images ------------------------------------------------------------
# wanted ID: in SWEEP_IMAGES (if set).
wanted() {
	local pat
	[ -z "${SWEEP_IMAGES:-}" ] && return 0
	for pat in $SWEEP_IMAGES; do
		# shellcheck disable=SC2254
		case $1 in $pat) return 0 ;; esac
	done
	return 1
}
want_corrupt=0
for ((i = 1; i < 100; i++)); do
	wanted "$(printf 'corrupt-%02d' $i)" && want_corrupt=1 && break
done

IDS=()
BUILD_FAILS=0
if [ -z "${SWEEP_NO_CORRUPT:-}" ] && [ $want_corrupt = 1 ]; then
	note "tests/corrupt.sh with SWEEP_SAVE (its own checks: see corrupt.sh's log)"
	# shellcheck disable=SC2097,SC2098  # both binaries are this build's
	SWEEP_SAVE=$W/img NO_WRITE_PROBES=1 CORRUPT_NO_FUSE=1 UEXT4=$UEXT4 UEXT4_ASAN=$UEXT4 \
		bash "$TOP/tests/corrupt.sh" > "$W/corrupt.log" 2>&1
	echo "corrupt.sh exited $?: $(tail -1 "$W/corrupt.log")"
	for f in "$W"/img/corrupt-*.img; do
		[ -e "$f" ] && IDS+=("$(basename "$f" .img)")
	done
	[ ${#IDS[@]} -gt 0 ] || { tail -20 "$W/corrupt.log"; fail "corrupt.sh saved no image"; }
fi
for b in "$TOP"/tests/images/mk_*.sh; do
	[ -e "$b" ] || continue
	id=$(basename "$b" .sh)
	wanted "$id" || continue
	out=$(timeout 120 bash "$b" "$W/img/$id.img" 2>&1)
	rc=$?
	if [ $rc = 77 ]; then
		echo "note: $id skipped: $out"
	elif [ $rc != 0 ]; then
		echo "FAIL: builder $id exited $rc: $out"
		BUILD_FAILS=$((BUILD_FAILS + 1))
	else
		echo "$out" | tail -1 > "$W/img/$id.img.desc"
		IDS+=("$id")
	fi
done

sel=()
for id in "${IDS[@]}"; do wanted "$id" && sel+=("$id"); done
IDS=("${sel[@]}")
# `make check` sweeps a sample (a fifth of the images in release, a tenth
# under the sanitizers, a fresh one each run); `make check-long`
# (UEXT4_LONG=1) sweeps them all, as does a run given SWEEP_IMAGES.
SAMPLE=${SWEEP_SAMPLE:-}
if [ -z "$SAMPLE" ] && [ -z "${UEXT4_LONG:-}" ] && [ -z "${SWEEP_IMAGES:-}" ]; then
	case "$UEXT4_BUILD" in
	*asan* | *tsan*) SAMPLE=$(((${#IDS[@]} + 9) / 10)) ;;
	*) SAMPLE=$(((${#IDS[@]} + 4) / 5)) ;;
	esac
fi
if [ -n "$SAMPLE" ] && [ "$SAMPLE" -lt ${#IDS[@]} ]; then
	SEED=${SWEEP_SEED:-$RANDOM}
	echo "sampling $SAMPLE of ${#IDS[@]} images (SWEEP_SEED=$SEED; SWEEP_SAMPLE=${#IDS[@]} runs all)"
	mapfile -t IDS < <(printf '%s\n' "${IDS[@]}" | shuf -n "$SAMPLE" --random-source=<(yes "$SEED") | sort)
fi
[ ${#IDS[@]} -gt 0 ] || fail "no image to sweep"
note "${#IDS[@]} images x $(echo $CMDS | wc -w) commands, binary $UEXT4"

# ---- e2fsck findings by kind ------------------------------------------------

# kinds IMG [E2FSCK_OUTPUT]: e2fsck -fn's findings, one kind a line, sorted.
kinds() {
	local img=$1
	if [ $# -gt 1 ]; then cat "$2"; else timeout 120 e2fsck -fn "$img" 2>&1; fi | awk -v img="$img" '
	# Digit runs not inside a word (e2fsck, ext2fs_open2 stay).
	function numbers(s,   out, i, j, n) {
		out = ""; n = length(s); i = 1
		while (i <= n) {
			if (substr(s, i, 1) ~ /[0-9]/ && (i == 1 || substr(s, i - 1, 1) !~ /[A-Za-z_]/)) {
				for (j = i; j <= n && substr(s, j, 1) ~ /[0-9]/; j++) ;
				out = out "N"; i = j
			} else {
				out = out substr(s, i, 1); i++
			}
		}
		return out
	}
	function norm(s) {
		while ((i = index(s, img)) > 0)
			s = substr(s, 1, i - 1) "IMG" substr(s, i + length(img))
		gsub(/\047[^\047]*\047/, "\047S\047", s)
		gsub(/<[0-9]+>\/[^ ,()]*/, "P", s)
		gsub(/\(\/[^ ,()]*/, "(P", s)
		gsub(/(^| )\/[^ ,()]*/, " P", s)
		gsub(/0x[0-9a-fA-F]+/, "N", s)
		s = numbers(s)
		gsub(/N--N/, "N", s)
		gsub(/[ \t]+/, " ", s)
		sub(/^ /, "", s); sub(/ $/, "", s)
		return s
	}
	/^e2fsck [0-9]/ || /^Pass [0-9]/ || /^$/ { next }
	/: [0-9]+\/[0-9]+ files \(/ { next }              # the summary line
	/\*\*\*\*\* FILE SYSTEM WAS MODIFIED|WARNING: Filesystem still has errors/ { next }
	{
		line = $0
		# e2fsck optimisations (extent trees that could be narrower or
		# shorter, directories to compress) are not problems: exit 0.
		if (line ~ /Optimi[sz]e\? no$/) next
		sub(/[ \t]*[A-Z][A-Za-z\047 \/+-]*\? no$/, "", line)   # the prompt
		if (line ~ /^[ \t]*$/) next
		if (match(line, /bitmap differences: /) && line ~ /differences: +[-+]/) {
			head = norm(substr(line, 1, RSTART + RLENGTH - 2))
			rest = substr(line, RSTART + RLENGTH)
			if (rest ~ /(^| )\+/) print head " +"
			if (rest ~ /(^| )-/) print head " -"
			next
		}
		print norm(line)
	}' | sort -u
}

# ---- what the commands act on ---------------------------------------------

# dtype IMG PATH: regular, directory, symlink, ... or nothing.
dtype() {
	debugfs -n -R "stat \"$2\"" "$1" 2> /dev/null | awk '/^Inode:/ {print $4; exit}'
}

# targets ID: sets T_NODE, T_REG, T_NONDIR, T_DIR for image ID.
targets() {
	local img=$W/img/$1.img p t nums cand=()
	T_NODE="" T_REG="" T_NONDIR="" T_DIR="" T_NODE_TYPE=""
	# Paths the description names, then the inodes e2fsck names.
	for p in $(grep -o '/[A-Za-z0-9._+/-]*' "$img.desc" 2> /dev/null); do
		p=${p%%.}
		[ "$p" = / ] || cand+=("$p")
	done
	# In e2fsck's order: "inode N", "inode #N", "Entry '...' in DIR (N)",
	# the items of "Inode bitmap differences" (ranges: their first inode).
	nums=$(awk '
	{
		s = tolower($0)
		if (s ~ /^inode bitmap differences:/) {
			t = substr(s, 26); gsub(/[^0-9]+/, " ", t); print t
			next
		}
		while (match(s, /inode #?[0-9]+| in [^ ]+ \([0-9]+\)/)) {
			t = substr(s, RSTART, RLENGTH); gsub(/[^0-9]+/, " ", t); print t
			s = substr(s, RSTART + RLENGTH)
		}
	}' "$img.fsck" | tr ' ' '\n' | awk '$1 > 11 && !seen[$1]++' | head -20)
	if [ -n "$nums" ]; then
		local -A pathof=()
		local i
		while IFS=$'\t' read -r i p; do
			while [[ $p == //* ]]; do p=${p#/}; done    # ncheck: "//name" in the root
			[ -n "$p" ] && [ -z "${pathof[$i]:-}" ] && pathof[$i]=$p
		done < <(debugfs -n -R "ncheck $(echo $nums)" "$img" 2> /dev/null | sed 1d)
		for i in $nums; do
			[ -n "${pathof[$i]:-}" ] && cand+=("${pathof[$i]}")
		done
	fi
	# Then the root's entries (debugfs ls -p: /ino/mode/uid/gid/name/size/).
	local entry
	while IFS=/ read -r _ _ _ _ _ entry _; do
		case $entry in . | .. | lost+found | "") continue ;; esac
		cand+=("/$entry")
	done < <(debugfs -n -R "ls -p /" "$img" 2> /dev/null)
	# The names of corrupt.sh's tree, for images debugfs cannot read.
	cand+=(/hello.txt /dir /lost+found)
	for p in "${cand[@]}"; do
		case $p in *' '*) continue ;; esac
		t=$(dtype "$img" "$p")
		[ -n "$t" ] || continue
		[ -z "$T_NODE" ] && T_NODE=$p T_NODE_TYPE=$t
		[ -z "$T_REG" ] && [ "$t" = regular ] && T_REG=$p
		[ -z "$T_NONDIR" ] && [ "$t" != directory ] && T_NONDIR=$p
		[ -z "$T_DIR" ] && [ "$t" = directory ] && T_DIR=$p
	done
	[ -z "$T_NODE" ] && T_NODE=/hello.txt T_NODE_TYPE=regular
	T_REG=${T_REG:-/hello.txt}
	T_NONDIR=${T_NONDIR:-/hello.txt} T_DIR=${T_DIR:-/dir}
}

# ---- comparing images --------------------------------------------------------

# Superblock bytes a mount, an unmount or an error record may change:
# s_mtime, s_wtime, s_mnt_count (0x2C-0x35), s_state (0x3A), s_kbytes_written
# (0x178), s_error_count .. s_last_error_func (0x194-0x1FF), the high bytes
# of the times and the error codes (0x274-0x27B), s_checksum (0x3FC).
SB_FREE="44-53 58-59 376-383 404-511 628-635 1020-1023"   # decimal (mawk)

# journal_blocks ID: the journal inode's blocks, one a line, in ID.jblocks.
journal_blocks() {
	local img=$W/img/$1.img j
	j=$(dumpe2fs -h "$img" 2> /dev/null | awk '/^Journal inode:/ {print $3}')
	: > "$img.jblocks"
	[ -n "$j" ] && debugfs -n -R "blocks <$j>" "$img" 2> /dev/null | tr ' ' '\n' | grep -E '^[0-9]+$' > "$img.jblocks"
	return 0
}

# The superblock bytes an error record (fs_error(), written outside the
# journal from the superblock as it was) may change: s_state's ERROR_FS,
# the error fields, their _hi bytes and codes, the checksum.
SB_ERROR="58-59 404-511 628-635 1020-1023"

# error_record_only A B: A and B are equal but for SB_ERROR: the command
# wrote nothing but the error record the errors= policy requires.
error_record_only() {
	cmp -s "$1" "$2" && return 0
	{ cmp -l "$1" "$2" 2> /dev/null || true; } | awk -v rec="$SB_ERROR" '
	BEGIN {
		n = split(rec, r, " ")
		for (i = 1; i <= n; i++) { split(r[i], lh, "-"); lo[i] = lh[1] + 0; hi[i] = lh[2] + 0 }
	}
	{
		o = $1 - 1 - 1024
		for (i = 1; i <= n; i++) if (o >= lo[i] && o <= hi[i]) next
		bad = 1; exit
	}
	END { exit bad }'
}

# same_fs A B BS JBLOCKS: A and B are equal outside SB_FREE and the journal;
# else prints the first differing blocks.
# touched_slots IMG REF: the byte offsets of the inode-table slots that
# recover alone changed (it frees orphans, stamping their times): there,
# same_fs passes over the time fields and the checksum, which differ by
# when the recovery ran, not by what it did.
touched_slots() {
	local isz
	isz=$(dumpe2fs -h "$1" 2> /dev/null | awk '/^Inode size:/ {print $3}')
	cmp -l "$1" "$2" 2> /dev/null | awk -v bs="$(cat "$1.bs")" -v isz="${isz:-256}" -v it="$(itable_ranges "$1")" '
	BEGIN { n = split(it, r, " "); for (i = 1; i <= n; i++) { split(r[i], lh, "-"); lo[i] = lh[1]; hi[i] = lh[2] } }
	{ o = $1 - 1; b = int(o / bs)
	  for (i = 1; i <= n; i++) if (b >= lo[i] && b <= hi[i]) { s = o - (o % isz); if (!(s in seen)) { seen[s] = 1; print s } } }'
	echo "isz ${isz:-256}"
}
itable_ranges() {
	dumpe2fs "$1" 2> /dev/null | sed -n 's/.*Inode table at \([0-9]*\)-\([0-9]*\).*/\1-\2/p' | tr '\n' ' '
}

same_fs() {
	cmp -s "$1" "$2" && return 0
	cmp -l "$1" "$2" 2> /dev/null | awk -v bs="$3" -v jf="$4" -v free="$SB_FREE" -v tf="${5:-/dev/null}" '
	BEGIN {
		while ((getline l < jf) > 0) j[l] = 1
		isz = 256
		while ((getline l < tf) > 0) { if (l ~ /^isz /) isz = substr(l, 5) + 0; else ts[l] = 1 }
		# inode fields set from the clock: a/c/m/dtime, checksum, extra times, crtime
		split("8-23 124-125 130-151", tr, " ")
		n = split(free, r, " ")
		for (i = 1; i <= n; i++) {
			split(r[i], lh, "-")
			lo[i] = lh[1] + 0; hi[i] = lh[2] + 0
		}
		nr = n
	}
	{
		o = $1 - 1
		if (o >= 1024 && o < 2048) {
			for (i = 1; i <= nr; i++)
				if (o - 1024 >= lo[i] && o - 1024 <= hi[i]) next
		}
		b = int(o / bs)
		if (b in j) next
		slot = o - (o % isz)
		if (slot in ts) {
			f = o - slot
			for (i in tr) { split(tr[i], fl, "-"); if (f >= fl[1] + 0 && f <= fl[2] + 0) next }
		}
		bad = 1
		if (!(b in seen)) { seen[b] = 1; printf "%d ", b; if (++k >= 8) exit }
	}
	END { exit bad }'
	[ "${PIPESTATUS[1]}" = 0 ]
}

# ---- running a command ---------------------------------------------------------

# san_check: a sanitizer log appeared (printed and removed).
san_check() {
	local f found=1
	for f in "$W"/san*; do
		[ -e "$f" ] || continue
		{ echo "---- sanitizer report:"; head -30 "$f"; } >> "$W/cell.err"
		rm -f "$f"
		found=0
	done
	return $found
}

# cmd_argv CMD IMG: the command line of column CMD (in ARGV).
cmd_argv() {
	local img=$2
	case $1 in
	md) ARGV=(mkdir "$img" /sweep_dir) ;;
	mds) ARGV=(mkdir "$img" "${T_DIR%/}/sweep_dir") ;;
	put) ARGV=(put "$img" "$H/file" /sweep_file) ;;
	pts) ARGV=(put "$img" "$H/small" "${T_DIR%/}/sweep_file") ;;
	ptr) ARGV=(put "$img" "$H/tree" /sweep_tree) ;;
	sx) ARGV=(setfattr -h -n trusted.sweep -v 1 "$img" "$T_NODE") ;;
	sxb) ARGV=(setfattr -n user.sweep_big -v "$BIGVAL" "$img" "$T_REG") ;;
	tr) ARGV=(truncate -s 1 "$img" "$T_REG") ;;
	rm) ARGV=(rm -r "$img" "$T_NODE") ;;
	rmd) ARGV=(rm -r "$img" "$T_DIR") ;;
	mv) ARGV=(mv "$img" "$T_NODE" /sweep_moved) ;;
	ln) ARGV=(ln "$img" "$T_NONDIR" /sweep_link) ;;
	sl) ARGV=(ln -s "$img" "$LONGTARGET" /sweep_symlink) ;;
	chm) ARGV=(chmod "$img" 600 "$T_NODE") ;;
	cho) ARGV=(chown -h "$img" 123:456 "$T_NODE") ;;
	rec) ARGV=(recover -q "$img") ;;
	esac
}

# run_uext4 ARGS...: RC, with stdout and stderr appended to cell.err.
run_uext4() {
	echo "\$ uext4 $(printf '%.200s ' "$@")" >> "$W/cell.err"
	timeout -k 5 30 "$UEXT4" "$@" >> "$W/cell.err" 2>&1 < /dev/null
	RC=$?
}

# fuse_cell IMG: mount read-write, a few writes, unmount, wait for the
# server's write-back (it holds the image's flock until then).  RC is the
# mount's exit status; the workload's failures are logged.
fuse_cell() {
	local img=$1 m=$W/mnt op
	mkdir -p "$m"
	run_uext4 mount "$img" "$m"
	[ $RC = 0 ] || return 0
	[ "${MOUNTS[*]}" = "${MOUNTS[*]/$m/}" ] && MOUNTS+=("$m")
	for op in "mkdir $m/sweep_fd" "cp $H/file $m/sweep_fd/f" "mv $m/sweep_fd/f $m/sweep_fd/g" \
		"ln -s g $m/sweep_fd/s" "truncate -s 1000 $m/sweep_fd/g" "cp $H/small $m${T_DIR%/}/sweep_ff" \
		"chmod 600 $m$T_NODE" "rm -f $m/sweep_fd/s" "ls -lR $m" "sync"; do
		# shellcheck disable=SC2086
		timeout 20 $op > /dev/null 2>> "$W/cell.err" || echo "(fuse: '$op' failed: $?)" >> "$W/cell.err"
	done
	fusermount3 -u "$m" 2>> "$W/cell.err" || umount -l "$m"
	timeout 30 flock "$img" true || { RC=124; echo "(fuse: the server did not finish in 30 s)" >> "$W/cell.err"; }
}

# crash_state RC: K! for a signal, H! for a timeout, else nothing.
crash_state() {
	case $1 in
	124 | 137) echo "H!" ;;
	*) [ "$1" -ge 128 ] && echo "K!" ;;
	esac
}

# is_multi CMD IMG: the command is several operations (a tree copied in or
# removed, a file created then written, a FUSE workload), each one whole,
# and stopped after the first: the earlier ones stay done, as with cp and
# rm.  (A put whose file is not there failed at its first step, the create.)
is_multi() {
	case $1 in
	put) [ -n "$(dtype "$2" /sweep_file)" ] ;;
	pts) [ -n "$(dtype "$2" "${T_DIR%/}/sweep_file")" ] ;;
	ptr) [ -n "$(dtype "$2" /sweep_tree)" ] ;;
	rmd | fus) return 0 ;;
	rm) [ "$T_NODE_TYPE" = directory ] ;;
	*) return 1 ;;
	esac
}

declare -A CELL
FAILED=()
# cell ID CMD: run one command on a copy of image ID, set CELL[ID,CMD].
cell() {
	local id=$1 cmd=$2 img=$W/img/$1.img c=$W/cell.img st="" rc new diffb ref
	cp "$img" "$c"
	: > "$W/cell.err"
	if [ "$cmd" = fus ]; then
		fuse_cell "$c"
	else
		cmd_argv "$cmd" "$c"
		run_uext4 "${ARGV[@]}"
	fi
	rc=$RC
	# What the command said (before recover adds its own words).
	local said
	said=$(grep -cv '^\$ uext4\|^(fuse' "$W/cell.err")
	st=$(crash_state $rc)
	san_check && st="K!"
	local same=0 strict_same=0
	error_record_only "$img" "$c" || strict_same=1
	if [ "$cmd" != rec ] && [ $strict_same = 0 ]; then
		# Not a byte changed: recover would make the reference image.
		cp "$img.refkinds" "$W/cell.kinds"
	else
		if [ "$cmd" != rec ]; then
			run_uext4 recover -q "$c"
			[ -z "$st" ] && st=$(crash_state $RC)
			san_check && st="K!"
		fi
		kinds "$c" > "$W/cell.kinds"
		# recover's own column: is the image what it was?
		ref=$W/img/$id.ref
		[ "$cmd" = rec ] && ref=$img
		diffb=$(same_fs "$ref" "$c" "$(cat "$img.bs")" "$img.jblocks" \
			"$([ "$cmd" = rec ] && echo /dev/null || echo "$img.touched")")
		same=$?
	fi
	# Strict for a refusal on an image whose mount alone writes nothing
	# (recover alone leaves it as it was); a mount that replays the
	# journal or cleans up orphans makes real changes: the relaxed rule.
	# A refusal whose file system is the same after recovery, but whose
	# bytes are not: it undid its changes inside its transaction, and the
	# commit of the restored blocks wrote the journal and the superblock
	# (verdict r, not a failure; the strict rule's C! is for the rest).
	local undone=0
	if [ "$STRICT" = 1 ] && [ $rc != 0 ] && cmp -s "$img" "$W/img/$id.ref"; then
		[ $same = 0 ] && [ $strict_same != 0 ] && undone=1
		same=$strict_same
	fi
	new=$(comm -13 "$img.kinds" "$W/cell.kinds")
	# recover that did its work but skipped what it could not process
	# exits 1 naming it (a stuck orphan, a journal block it could not
	# replay): judged as written.
	local judged_rc=$rc
	[ "$cmd" = rec ] && [ $rc = 1 ] && grep -q "left for e2fsck\|not replayed" "$W/cell.err" &&
		judged_rc=0
	if [ -z "$st" ]; then
		if [ $judged_rc != 0 ]; then
			if [ "$said" = 0 ]; then st="M!"
			elif [ $same != 0 ] && is_multi "$cmd" "$c"; then st=P
			elif [ $undone = 1 ]; then st=r
			elif [ $same != 0 ]; then st="C!"
			else st=R; fi
		elif [ $same = 0 ]; then st=U
		elif [ -s "$W/cell.kinds" ]; then st=w
		else st=W; fi
	fi
	[ -n "$new" ] && [ "${st:1:1}" != "!" ] && st="X!"
	CELL[$id,$cmd]=$st
	if [ "${st:1:1}" = "!" ]; then
		FAILED+=("$id,$cmd")
		{
			echo "---- $id $cmd: $st (exit $rc)"
			[ -n "$new" ] && { echo "new kinds of e2fsck findings:"; echo "$new" | sed 's/^/    /'; }
			if [ "$st" = "C!" ] && [ "$STRICT" = 1 ]; then
				echo "the refusal changed the image's bytes (beyond an error record)"
			elif [ "$st" = "C!" ]; then
				echo "differs (after recover) from the image recover alone makes, at blocks: $diffb"
			fi
			head -c 3000 "$W/cell.err"
		} >> "$W/failures"
		if [ -n "${SWEEP_KEEP:-}" ]; then
			mkdir -p "$SWEEP_KEEP" && cp --sparse=always "$c" "$SWEEP_KEEP/$id.$cmd.img"
		fi
	fi
}

# prepare ID: block size, e2fsck's findings, targets, journal blocks, and
# the reference: the image after `recover` alone.
prepare() {
	local id=$1 img=$W/img/$1.img
	dumpe2fs -h "$img" 2> /dev/null | awk '/^Block size:/ {print $3}' > "$img.bs"
	[ -s "$img.bs" ] || echo 1024 > "$img.bs"
	timeout 120 e2fsck -fn "$img" > "$img.fsck" 2>&1
	kinds "$img" "$img.fsck" > "$img.kinds"
	journal_blocks "$id"
	targets "$id"
	cp "$img" "$W/img/$id.ref"
	timeout -k 5 30 "$UEXT4" recover -q "$W/img/$id.ref" > /dev/null 2>&1 < /dev/null
	san_check > /dev/null
	kinds "$W/img/$id.ref" > "$img.refkinds"
	touched_slots "$img" "$W/img/$id.ref" > "$img.touched"
	echo "$id: $(head -c 100 "$img.desc"); NODE=$T_NODE REG=$T_REG NONDIR=$T_NONDIR DIR=$T_DIR;" \
		"e2fsck: $(wc -l < "$img.kinds") kinds"
}

START=$(date +%s)
for id in "${IDS[@]}"; do
	prepare "$id"
	for cmd in $CMDS; do
		if [ "$cmd" = fus ] && [ $FUSE = 0 ]; then CELL[$id,$cmd]="-"; continue; fi
		cell "$id" "$cmd"
	done
	rm -f "$W/img/$id.ref"
done
SECS=$(($(date +%s) - START))

# ---- the table ---------------------------------------------------------------
echo
printf '%-24s' "image"
for cmd in $CMDS; do printf '%-4s' "$cmd"; done
echo
for id in "${IDS[@]}"; do
	printf '%-24s' "${id:0:23}"
	for cmd in $CMDS; do printf '%-4s' "${CELL[$id,$cmd]:--}"; done
	echo
done
echo "U unchanged, R refused (image unchanged), r refused and undone (the same file system, but the"
echo "commit of the restored blocks wrote the journal and superblock), W written (e2fsck clean), w written (only old kinds),"
echo "P refused part way (several operations), X! new kind of e2fsck finding,"
echo "C! refused but changed, M! refused silently, K! crash, H! hang, - not run"
echo
declare -A COUNT
for id in "${IDS[@]}"; do
	for cmd in $CMDS; do
		s=${CELL[$id,$cmd]:--}
		COUNT[$s]=$((${COUNT[$s]:-0} + 1))
	done
done
summary=""
for s in U R r W w P X! C! M! K! H! -; do [ -n "${COUNT[$s]:-}" ] && summary+="$s=${COUNT[$s]} "; done
echo "cells: $summary(${SECS}s)"
if [ ${#FAILED[@]} -gt 0 ]; then
	echo
	echo "==== failing cells (${#FAILED[@]}): $(printf '%s ' "${FAILED[@]}")"
	cat "$W/failures"
fi
[ ${#FAILED[@]} = 0 ] && [ $BUILD_FAILS = 0 ] || fail "${#FAILED[@]} failing cells, $BUILD_FAILS failed builders"
echo "sweep.sh: passed"
