#!/bin/bash
# run-in: release asan
# verity.sh - fs-verity (mkfs -O verity, uext4 verity enable|measure|dump),
# with fsverity-utils as the oracle (this kernel has no CONFIG_FS_VERITY):
#   1. uext4 mkfs -O verity and mke2fs -O verity, 1 KiB and 4 KiB blocks
#      (dumpe2fs -h lists the same features for both):
#      files of 0 bytes, one block, many blocks (a tree of 2-3 levels) and a
#      size that is no multiple of the block, sha256 without salt and
#      sha512 with a salt: `uext4 verity measure` equals `fsverity digest`
#      of the original content, `uext4 cat` gives the content back, the
#      descriptor dumped is the one fsverity digest --out-descriptor
#      writes; e2fsck -fn clean after each enable (it checks that blocks
#      past i_size belong to verity files only).
#   2. A verity file takes no write: truncates down and up (EPERM), a
#      second enable (EEXIST) are refused and the image stays byte-for-byte
#      the same; other files of the image are still written.  (put over it
#      replaces the name, as mv does, so it is no refusal to test.)
#   3. Damage, each on a copy: a flipped data bit fails the read with EIO
#      naming that data block, after the bytes before it came out right; a
#      flipped bit in the top tree block, and in the last level-0 tree
#      block, fail with EIO naming a Merkle tree block; the descriptor
#      zeroed, or the metadata punched away, give a clear error (exit 1,
#      no crash) on cat and measure.
#   4. The kernel (loop, without CONFIG_FS_VERITY) mounts the image read-only
#      and read-write, reads the other files identically and refuses to open
#      the verity file (EOPNOTSUPP); e2fsck clean and our digest unchanged
#      after its read-write mount.
#   6. (run before 5) An enable that runs out of space fails with ENOSPC,
#      frees what it wrote (free count as before), sets no flag, leaves the
#      file as it was and writable; e2fsck clean.
#   5. Through `uext4 mount` (FUSE): fsverity enable and fsverity measure
#      work, the digest equals fsverity digest; append, O_TRUNC, fallocate
#      and truncate are EPERM, and the content is unchanged.
. "$(dirname "$0")/lib.sh"
setup_traps
need mke2fs:e2fsprogs dumpe2fs:e2fsprogs e2fsck:e2fsprogs debugfs:e2fsprogs fsverity:fsverity python3
need_built "$UEXT4"
export LC_ALL=C
test_dir
test_seed verity
FAILS=0
ok() { echo "ok: $*"; }

check_fsck() {
	fsck_clean "$1" > "$T/fsck" || { bad "e2fsck after $2:"; head -20 "$T/fsck"; }
}

# flip IMAGE BLOCKSIZE PBLK BYTE: flip the low bit of byte BYTE of block PBLK.
flip() {
	python3 - "$@" << 'EOF'
import sys
img, bs, pblk, byte = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with open(img, "r+b") as f:
    f.seek(pblk * bs + byte)
    b = f.read(1)
    f.seek(pblk * bs + byte)
    f.write(bytes([b[0] ^ 1]))
EOF
}
# zero IMAGE BLOCKSIZE PBLK: zero one block.
zero() { dd if=/dev/zero of="$1" bs="$2" seek="$3" count=1 conv=notrunc status=none; }
# pblk IMAGE PATH LBLK: the physical block (debugfs bmap).
pblk() { debugfs -R "bmap $2 $3" "$1" 2> /dev/null; }

# make_src NAME SIZE: random content from the seed.
make_src() {
	python3 -c "import random,sys; random.seed($SEED + $2); sys.stdout.buffer.write(random.randbytes($2))" > "$T/$1"
}

declare -A feat
for BS in 1024 4096; do
	MB=$BS   # the Merkle block: at most the block size (and the page)
	for MAKER in uext4 mke2fs; do
		CASE="$MAKER ${BS}B"
		img=$T/v$BS$MAKER.img
		if [ $MAKER = uext4 ]; then
			"$UEXT4" mkfs -q -b $BS -O verity "$img" 32M > /dev/null || fail "uext4 mkfs -O verity"
		else
			# uext4 mkfs adds orphan_file and metadata_csum_seed to the defaults
			mke2fs -q -F -t ext4 -b $BS -O verity,orphan_file,metadata_csum_seed "$img" 32M || fail "mke2fs -O verity"
		fi
		feat[$MAKER]=$(dumpe2fs -h "$img" 2> /dev/null | grep '^Filesystem features:')
		[[ "${feat[$MAKER]}" == *" verity"* ]] || bad "no verity feature in dumpe2fs -h"
		[ $MAKER = uext4 ] || [ "${feat[uext4]}" = "${feat[mke2fs]}" ] ||
			bad "features differ: uext4 mkfs '${feat[uext4]}', mke2fs '${feat[mke2fs]}'"
		check_fsck "$img" mkfs
		n=0
		for size in 0 $BS $((3 << 20)) 300001; do
			n=$((n + 1))
			make_src "f$size" $size
			if [ $((n % 2)) = 0 ]; then
				opts=(--hash-alg=sha512 --salt=00112233445566778899aabbccddeeff --block-size=$MB)
			else
				opts=(--hash-alg=sha256 --block-size=$MB)
			fi
			cli_run put "$img" "$T/f$size" "/f$size"
			[ $RC = 0 ] || { bad "put /f$size: $ERR"; continue; }
			cli_run verity enable "${opts[@]}" "$img" "/f$size"
			[ $RC = 0 ] || { bad "enable /f$size ${opts[*]}: $ERR"; continue; }
			check_fsck "$img" "enable /f$size"
			want=$(fsverity digest "${opts[@]}" --out-descriptor="$T/desc" "$T/f$size" | cut -d' ' -f1)
			cli_run verity measure "$img" "/f$size"
			got=$(cut -d' ' -f1 "$T/out")
			[ -n "$want" ] && [ "$got" = "$want" ] && ok "$CASE /f$size ${opts[0]}: $got" ||
				bad "/f$size ${opts[*]}: measure $got, fsverity digest $want ($ERR)"
			cli_run verity dump descriptor "$img" "/f$size"
			cmp -s "$T/out" "$T/desc" || bad "/f$size: the descriptor differs from fsverity's"
			"$UEXT4" cat "$img" "/f$size" 2> "$T/err" | cmp -s - "$T/f$size" ||
				bad "/f$size reads back different: $(cat "$T/err")"
		done
	done

	# 2. refused writes, on the last image (mke2fs's)
	CASE="writes ${BS}B"
	cp "$img" "$T/before"
	for cmd in "truncate -s 10 $img /f$((3 << 20))" "truncate -s 4000000 $img /f$((3 << 20))" \
		"verity enable --block-size=$MB $img /f$((3 << 20))"; do
		read -ra argv <<< "$cmd"
		cli_run "${argv[@]}"
		[ $RC != 0 ] || bad "uext4 $cmd succeeded on a verity file"
		case "${argv[0]}" in
		verity) grep -q "already" "$T/err" || bad "second enable: $ERR" ;;
		*) grep -q "Operation not permitted\|verity" "$T/err" || bad "$cmd: not EPERM: $ERR" ;;
		esac
		cmp -s "$img" "$T/before" || bad "a refused '$cmd' changed the image"
	done
	cli_run put "$img" "$T/f300001" /other
	[ $RC = 0 ] && ok "$CASE: refused, and another file written" || bad "put /other: $ERR"
	check_fsck "$img" "writes"

	# 3. damage, each on a copy of the image
	CASE="damage ${BS}B"
	f=/f$((3 << 20))
	size=$((3 << 20))
	meta=$(((size + 65535) / 65536 * 65536 / BS))   # first tree block (lblk)
	bad_blk=$(((5 << 19) / MB))                       # at 2.5 MiB
	cp "$img" "$T/d.img"
	flip "$T/d.img" $BS "$(pblk "$T/d.img" $f $((bad_blk * MB / BS)))" 7
	"$UEXT4" cat "$T/d.img" $f > "$T/out" 2> "$T/err"
	rc=$?
	[ $rc = 1 ] && grep -q "data block $bad_blk does not match" "$T/err" &&
		grep -q "Input/output error" "$T/err" && ok "$CASE: flipped data bit: $(tail -c 120 "$T/err")" ||
		bad "flipped data bit: exit $rc: $(cat "$T/err")"
	cmp -s "$T/out" <(head -c $((2 << 20)) "$T/f$size") ||
		bad "the bytes before the bad 1 MiB chunk did not come out right ($(stat -c %s "$T/out") bytes)"
	check_fsck "$T/d.img" "a flipped data bit"
	for which in top level0; do
		cp "$img" "$T/d.img"
		if [ $which = top ]; then lb=$meta; else
			# the last tree block: just before the descriptor's block
			lb=$(( ($(debugfs -R "stat $f" "$T/d.img" 2> /dev/null | grep -o '([0-9]*-*[0-9]*):[0-9]*' |
				tail -1 | sed 's/(\([0-9]*-\)*\([0-9]*\)).*/\2/')) - 1 ))
		fi
		flip "$T/d.img" $BS "$(pblk "$T/d.img" $f $lb)" 3
		cli_run cat "$T/d.img" $f
		[ $RC = 1 ] && grep -q "Merkle tree block" "$T/err" && ok "$CASE: flipped $which tree bit (lblk $lb)" ||
			bad "flipped $which tree bit (lblk $lb): exit $RC: $ERR"
	done
	cp "$img" "$T/d.img"
	last=$(debugfs -R "stat $f" "$T/d.img" 2> /dev/null | grep -o '([0-9]*-*[0-9]*):[0-9]*' |
		tail -1 | sed 's/(\([0-9]*-\)*\([0-9]*\)).*/\2/')
	zero "$T/d.img" $BS "$(pblk "$T/d.img" $f "$last")"
	for c in cat "verity measure"; do
		cli_run $c "$T/d.img" $f
		[ $RC = 1 ] && grep -q "descriptor" "$T/err" && ok "$CASE: zeroed descriptor, $c: $ERR" ||
			bad "zeroed descriptor, $c: exit $RC: $ERR"
	done
	cp "$img" "$T/d.img"
	debugfs -w -R "punch $f $meta" "$T/d.img" > /dev/null 2>&1
	for c in cat "verity measure"; do
		cli_run $c "$T/d.img" $f
		[ $RC = 1 ] && grep -q "missing or cut off" "$T/err" && ok "$CASE: metadata cut off, $c" ||
			bad "metadata cut off, $c: exit $RC: $ERR"
	done

	# 4. the kernel, without CONFIG_FS_VERITY
	CASE="kernel ${BS}B"
	if can_loop; then
		mkdir -p "$T/k"
		for mode in "ro,noload" rw; do
			if ! kmount "$img" "$T/k" "$mode"; then
				bad "the kernel does not mount the verity image ($mode)"
				continue
			fi
			cmp -s "$T/k/other" "$T/f300001" || bad "kernel ($mode): /other differs"
			err=$(cat "$T/k$f" 2>&1 > /dev/null)
			case "$err" in
			*"not supported"*) ok "$CASE ($mode): mounts; the verity file: $err" ;;
			"") cmp -s "$T/k$f" "$T/f$size" || bad "kernel ($mode) reads $f differently" ;;
			*) bad "kernel ($mode): $f: $err" ;;
			esac
			umount "$T/k"
			MOUNTS=("${MOUNTS[@]/$T\/k/}")
		done
		check_fsck "$img" "the kernel's read-write mount"
		cli_run verity measure "$img" $f
		want=$(fsverity digest --hash-alg=sha256 --block-size=$MB "$T/f$size" | cut -d' ' -f1)
		[ "$(cut -d' ' -f1 "$T/out")" = "$want" ] || bad "digest after the kernel's mount: $(cat "$T/out")"
	else
		echo "SKIP part: the kernel oracle needs root and a loop device"
	fi
done
CASE=

# 6. a failed enable (no room for the tree): ENOSPC, the blocks written so
# far freed again, no flag, the file as it was and writable; e2fsck clean.
CASE="ENOSPC"
img=$T/full.img
"$UEXT4" mkfs -q -b 1024 -m 0 -O verity "$img" 16M > /dev/null || fail "mkfs of $img"
make_src big $((3 << 20))
cli_run put "$img" "$T/big" /big
free=$(dumpe2fs -h "$img" 2> /dev/null | awk '/^Free blocks:/ {print $3}')
head -c $(((free - 60) * 1024)) /dev/zero > "$T/fill"   # the tree needs 100 blocks
cli_run put "$img" "$T/fill" /fill
[ $RC = 0 ] || bad "put /fill: $ERR"
cli_run verity enable --block-size=1024 "$img" /big
[ $RC = 1 ] && grep -q "No space left" "$T/err" && ok "$CASE: enable refused: $ERR" ||
	bad "enable on a full image: exit $RC: $ERR"
after=$(dumpe2fs -h "$img" 2> /dev/null | awk '/^Free blocks:/ {print $3}')
[ "$after" = 60 ] || bad "$after blocks free after the failed enable, want 60"
check_fsck "$img" "a failed enable"
cli_run lsattr "$img" /big
grep -q -- '-V-' "$T/out" && bad "the flag is set after a failed enable: $(cat "$T/out")"
"$UEXT4" cat "$img" /big | cmp -s - "$T/big" || bad "/big changed by the failed enable"
cli_run truncate -s 100 "$img" /big
[ $RC = 0 ] && ok "$CASE: the file is writable again" || bad "truncate after a failed enable: $ERR"
check_fsck "$img" "truncate after a failed enable"
CASE=

# 5. through the mount
if [ -c /dev/fuse ] && command -v fusermount3 > /dev/null; then
	img=$T/fuse.img
	"$UEXT4" mkfs -q -b 4096 -O verity "$img" 32M > /dev/null
	mkdir -p "$T/m"
	if fuse_mount_fg "$img" "$T/m"; then
		make_src g 123457
		cp "$T/g" "$T/m/g"
		if fsverity enable --hash-alg=sha512 --salt=beef "$T/m/g" 2> "$T/err"; then
			got=$(fsverity measure "$T/m/g" | cut -d' ' -f1)
			want=$(fsverity digest --hash-alg=sha512 --salt=beef "$T/g" | cut -d' ' -f1)
			[ "$got" = "$want" ] && ok "FUSE: fsverity enable + measure: $got" ||
				bad "FUSE: measure $got, digest $want"
			for w in "echo x >> $T/m/g" ": > $T/m/g" "fallocate -l 1M $T/m/g" "truncate -s 0 $T/m/g"; do
				err=$( (eval "$w") 2>&1)
				case "$err" in *"not permitted"*) ok "FUSE: '$w' refused: EPERM" ;;
				*) bad "FUSE: '$w' on a verity file: '$err'" ;; esac
			done
			cmp -s "$T/m/g" "$T/g" || bad "FUSE: the verity file reads differently"
		else
			bad "FUSE: fsverity enable: $(cat "$T/err")"
		fi
		fuse_umount "$T/m"
		check_fsck "$img" "the FUSE mount"
	else
		bad "uext4 mount failed"
	fi
else
	echo "SKIP part: FUSE (/dev/fuse, fusermount3) missing"
fi

[ "$FAILS" = 0 ] || fail "$FAILS checks failed"
echo PASS
