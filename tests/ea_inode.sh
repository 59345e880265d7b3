#!/bin/bash
# ea_inode.sh - xattr values in EA inodes and the ext_attr feature.
#
# Case 1, on ea_inode images (4 KiB blocks with 256-byte inodes, where
# EA entries sit in the inode body, and 1 KiB blocks with 128-byte inodes,
# where they sit in a shared xattr block):
#  - through the CLI: values of 0 bytes to 64 KiB are set, replaced (EA
#    inode -> inline -> EA inode), shared (one `uext4 setfattr` of a large
#    value on two files: one EA inode, reference count 2), removed
#    (setfattr -x, then `uext4 rm` of the last user frees the EA inode);
#  - through a read-write FUSE mount, with setfattr(1)/getfattr(1): the same;
#  - after every step: each file's xattrs as `uext4 getfattr` shows them
#    equal the model, and (with a loop device) as the kernel reads them on a
#    read-only loop mount; e2fsck -fn is clean; the number of inodes in use
#    is the files plus one per distinct large value (dumpe2fs -h), and the
#    EA inodes' reference counts (debugfs) are what e2fsck expects;
#  - values set by e2fsprogs (tests/images/mk_ea_inode.sh) and by the kernel
#    on a read-write loop mount, their file then deleted with `uext4 rm`:
#    the EA inode is freed and e2fsck is clean.
# Symlinks: uext4 refuses EA-inode values on them (e2fsck 1.47 would take
# the symlink for a slow one), leaving the inode and the free counts as
# they were;
# a kernel-made one is freed by `uext4 rm` with e2fsck clean.
# Case 2: on an ext2 image made with -O ^ext_attr -I 128
# (tests/images/mk_no_ext_attr.sh), `uext4 setfattr` sets the ext_attr
# feature (dumpe2fs -h), e2fsck -fn is clean and the kernel reads the value.
# Without a loop device the kernel comparisons are skipped (with a message);
# everything else still runs.
# run-in: release asan-long
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need mke2fs e2fsck debugfs dumpe2fs python3 base64
export LC_ALL=C

T=$(mktemp_dir)
SEED=${SEED:-$((RANDOM * 32768 + RANDOM))}
echo "seed $SEED"
u() { "$UEXT4" "$@" > "$T/out" 2> "$T/err" || bad "uext4 $*: exit $?: $(head -3 "$T/err")"; }
KERNEL=0
if can_loop; then
	KERNEL=1
else
	echo "NOTE: no loop device (or not root): kernel comparisons skipped, e2fsck checks still run"
fi
HAVE_FUSE=0
if [ -e /dev/fuse ] && command -v fusermount3 > /dev/null && command -v setfattr > /dev/null; then
	HAVE_FUSE=1
else
	echo "NOTE: no FUSE or setfattr(1): the FUSE part is skipped"
fi

# --- values: deterministic from the seed, one file per (size, variant)
VAL=$T/values
mkdir -p "$VAL"
value() { # value SIZE VARIANT: path of the value file
	local f=$VAL/$1.$2
	[ -e "$f" ] || python3 -c '
import random, sys
size, var, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed * 1000003 + size * 31 + var)
v = bytearray(r.getrandbits(8) for _ in range(size))
if size:
    v[-1] |= 0x80   # never text: uext4 getfattr then shows it in base64, losslessly
sys.stdout.buffer.write(bytes(v))' "$1" "$2" "$SEED" > "$f"
	echo "$f"
}
# setfattr(1) leaves a value unchanged for "0s": an empty value is "".
b64() { if [ -s "$1" ]; then echo "0s$(base64 -w0 "$1")"; else echo ""; fi; }

# --- the model: $MODEL/FILE/NAME holds the value FILE's xattr NAME has
MODEL=$T/model
model_set() { mkdir -p "$MODEL/$1"; cp "$3" "$MODEL/$1/$2"; }
model_rm() { rm -f "$MODEL/$1/$2"; }
model_rmfile() { rm -rf "${MODEL:?}/$1"; }

cat > "$T/check.py" << 'EOF'
# check.py MODEL IMAGE UEXT4 [KERNEL_MNT]: every file's xattrs, as uext4
# getfattr -d shows them (and the kernel, on a mount), equal the model.
import base64, os, subprocess, sys

def decode(v):
    if v.startswith('0s'):
        return base64.b64decode(v[2:])
    if v.startswith('0x'):
        return bytes.fromhex(v[2:])
    if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
        s, out, i = v[1:-1], bytearray(), 0
        while i < len(s):
            if s[i] == '\\' and i + 1 < len(s):
                j, val = i + 1, 0
                while j < len(s) and j < i + 4 and s[j] in '01234567':
                    val, j = val * 8 + int(s[j]), j + 1
                if j > i + 1:
                    out.append(val)
                    i = j
                else:
                    out += s[i + 1].encode('latin-1')
                    i += 2
                continue
            out += s[i].encode('latin-1')
            i += 1
        return bytes(out)
    return v.encode('latin-1')

model, img, uext4 = sys.argv[1], sys.argv[2], sys.argv[3]
kmnt = sys.argv[4] if len(sys.argv) > 4 else None
bad = 0
files = sorted(os.listdir(model)) if os.path.isdir(model) else []
for f in files:
    want = {}
    for n in os.listdir(os.path.join(model, f)):
        with open(os.path.join(model, f, n), 'rb') as fh:
            want[n] = fh.read()
    p = subprocess.run([uext4, 'getfattr', '-d', img, '/' + f], capture_output=True)
    if p.returncode != 0:
        print('FAIL: uext4 getfattr %s: %s' % (f, p.stderr.decode(errors='replace')))
        bad += 1
        continue
    got = {}
    for line in p.stdout.decode('latin-1').splitlines():
        if not line or line.startswith('#'):
            continue
        name, eq, v = line.partition('=')
        got[name] = decode(v) if eq else b''
    if got != want:
        print('FAIL: uext4 getfattr /%s: names %s, model %s; differing: %s' % (
            f, sorted(got), sorted(want),
            [n for n in want if got.get(n) != want[n]]))
        bad += 1
    if kmnt:
        path = os.path.join(kmnt, f)
        try:
            names = [n for n in os.listxattr(path, follow_symlinks=False)
                     if n.startswith('user.')]
            kgot = {n: os.getxattr(path, n, follow_symlinks=False) for n in names}
        except OSError as e:
            print('FAIL: kernel xattrs of %s: %s' % (path, e))
            bad += 1
            continue
        if kgot != want:
            print('FAIL: kernel /%s: names %s, model %s; differing: %s' % (
                f, sorted(kgot), sorted(want),
                [n for n in want if kgot.get(n) != want[n]]))
            bad += 1
print('checked %d files%s: %s' % (len(files), ' (uext4 and kernel)' if kmnt else '',
                                  'MISMATCH' if bad else 'ok'))
sys.exit(1 if bad else 0)
EOF

used_inodes() { # inodes in use, from the superblock
	dumpe2fs -h "$1" 2> /dev/null | awk -F: '
		/^Inode count/ { c = $2 } /^Free inodes/ { f = $2 } END { print c - f }'
}
# ea_inum IMAGE PATH NAME: the EA inode an entry names (inode body or block)
ea_inum() {
	local acl n
	n=$(debugfs -R "inode_dump -x $2" "$1" 2> /dev/null | awk -v nm="${3#user.}" '
		/value_inum =/ { split($0, a, "value_inum = "); split(a[2], b, ","); inum = b[1] }
		/^name = / { if ($3 == nm) { print inum; exit } }')
	if [ -z "$n" ] || [ "$n" = 0 ]; then
		acl=$(debugfs -R "stat $2" "$1" 2> /dev/null | sed -n 's/.*File ACL: \([0-9]*\).*/\1/p')
		[ -n "$acl" ] && [ "$acl" != 0 ] &&
			n=$(debugfs -R "block_dump -x $acl" "$1" 2> /dev/null | awk -v nm="${3#user.}" '
				/value_inum =/ { split($0, a, "value_inum = "); split(a[2], b, ","); inum = b[1] }
				/^name = / { if ($3 == nm) { print inum; exit } }')
	fi
	echo "${n:-0}"
}
ea_ref() { # ea_ref IMAGE INUM: the EA inode's reference count (low 32 bits)
	debugfs -R "stat <$2>" "$1" 2> /dev/null |
		sed -n 's/.*Version: 0x\([0-9a-f]*:\)\{0,1\}\([0-9a-f]*\).*/\2/p' | head -1 |
		while read -r h; do echo $((16#$h)); done
}

# check IMAGE WHAT [EXPECTED_USED_INODES]: model, kernel, e2fsck, inode count
check() {
	local img=$1 what=$2 want=${3:-} km=$T/kmnt used
	if ! fsck_clean "$img" > "$T/fsck" 2>&1; then
		bad "$what: e2fsck -fn not clean:"
		head -30 "$T/fsck"
	fi
	if [ "$KERNEL" = 1 ]; then
		mkdir -p "$km"
		if kmount "$img" "$km" ro; then
			python3 "$T/check.py" "$MODEL" "$img" "$UEXT4" "$km" > "$T/chk" ||
				bad "$what: xattrs differ"
			kumount "$km"
		else
			bad "$what: kernel read-only mount failed"
		fi
	else
		python3 "$T/check.py" "$MODEL" "$img" "$UEXT4" > "$T/chk" || bad "$what: xattrs differ"
	fi
	grep -v '^checked' "$T/chk"
	if [ -n "$want" ]; then
		used=$(used_inodes "$img")
		[ "$used" = "$want" ] || bad "$what: $used inodes in use, want $want"
	fi
	echo "  $what: $(tail -1 "$T/chk"), e2fsck clean${want:+, $want inodes in use}"
}

# Sizes: 0 bytes to 64 KiB, around the inode-body, block and EA limits.
SIZES=(0 1 3 100 1000 3000 968 969 4040 4041 4096 5000 8192 16384 32768 65536)
for i in 1 2 3; do SIZES+=($(((SEED / i) % 65537))); done

# large SIZE BLOCKSIZE: does a file's only value go to an EA inode?  Too
# large for the inode body, it goes to the block, where with ea_inode the
# values must leave min(block / 8, 1024) bytes (EXT4_XATTR_BLOCK_RESERVE).
large() {
	local r=$(($2 / 8))
	((r > 1024)) && r=1024
	[ $((($1 + 3) / 4 * 4)) -gt $(($2 - r)) ]
}

# --- CLI: set, replace, share, remove -----------------------------------------
cli_variant() { # cli_variant BLOCKSIZE INODESIZE
	local bs=$1 is=$2 img=$T/cli-$1-$2.img base n i f sz v nlarge inum ref want_ref acl1 acl2
	note "CLI, $bs-byte blocks, $is-byte inodes"
	rm -rf "$MODEL"
	mkdir -p "$MODEL"
	truncate -s 128M "$img"
	mke2fs -q -F -t ext4 -b "$bs" -I "$is" -O ea_inode "$img" 2> /dev/null ||
		{ bad "mke2fs -O ea_inode"; return; }
	base=$(used_inodes "$img")
	n=${#SIZES[@]}
	echo x > "$T/x"
	for ((i = 0; i < n; i++)); do u put "$img" "$T/x" "/c$i"; mkdir -p "$MODEL/c$i"; done
	# Set: one value per file, every size.
	nlarge=0
	for ((i = 0; i < n; i++)); do
		sz=${SIZES[i]}
		v=$(value "$sz" 0)
		u setfattr "$img" -n user.v -v "$(b64 "$v")" "/c$i"
		model_set "c$i" user.v "$v"
		large "$sz" "$bs" && nlarge=$((nlarge + 1))
	done
	check "$img" "set ${SIZES[*]} bytes" $((base + n + nlarge))
	# Replace: each value by another size (EA -> inline -> EA and EA -> EA).
	nlarge=0
	for ((i = 0; i < n; i++)); do
		sz=${SIZES[(i + 5) % n]}
		v=$(value "$sz" 1)
		u setfattr "$img" -n user.v -v "$(b64 "$v")" "/c$i"
		model_set "c$i" user.v "$v"
		large "$sz" "$bs" && nlarge=$((nlarge + 1))
	done
	check "$img" "replaced" $((base + n + nlarge))
	# Share: one large value on two files (one mount) -> one EA inode, count 2.
	u put "$img" "$T/x" /s1
	u put "$img" "$T/x" /s2
	v=$(value 65536 7)
	u setfattr "$img" -n user.shared -v "$(b64 "$v")" /s1 /s2
	model_set s1 user.shared "$v"
	model_set s2 user.shared "$v"
	inum=$(ea_inum "$img" /s1 user.shared)
	[ "$inum" != 0 ] && [ "$inum" = "$(ea_inum "$img" /s2 user.shared)" ] ||
		bad "shared value: EA inodes $inum and $(ea_inum "$img" /s2 user.shared)"
	ref=$(ea_ref "$img" "$inum")
	# In inode bodies each entry is a reference; with 128-byte inodes the
	# entries are in one xattr block the two files share, which counts once.
	want_ref=2
	if [ "$is" = 128 ]; then
		want_ref=1
		acl1=$(debugfs -R "stat /s1" "$img" 2> /dev/null | sed -n 's/.*File ACL: \([0-9]*\).*/\1/p')
		acl2=$(debugfs -R "stat /s2" "$img" 2> /dev/null | sed -n 's/.*File ACL: \([0-9]*\).*/\1/p')
		[ "$acl1" != 0 ] && [ "$acl1" = "$acl2" ] ||
			bad "/s1 and /s2 do not share their xattr block: $acl1, $acl2"
	fi
	[ "$ref" = "$want_ref" ] || bad "shared EA inode $inum: reference count $ref, want $want_ref"
	check "$img" "64 KiB value shared by /s1 and /s2 (EA inode $inum, count $ref)" \
		$((base + n + nlarge + 3))
	# Another xattr on /s1: with 128-byte inodes its block is copied on
	# write, and the copy names the EA inode too (count 2); else it goes to
	# the inode body.
	v=$(value 40 8)
	u setfattr "$img" -n user.extra -v "$(b64 "$v")" /s1
	model_set s1 user.extra "$v"
	ref=$(ea_ref "$img" "$inum")
	[ "$ref" = 2 ] || bad "EA inode $inum after a change of /s1: count $ref, want 2"
	check "$img" "/s1 changed (count $ref)" $((base + n + nlarge + 3))
	# Remove: from one sharer (count 1), then delete the other (freed).
	u setfattr "$img" -x user.shared /s1
	model_rm s1 user.shared
	ref=$(ea_ref "$img" "$inum")
	[ "$ref" = 1 ] || bad "EA inode $inum after setfattr -x on /s1: count $ref, want 1"
	check "$img" "removed from /s1 (count $ref)" $((base + n + nlarge + 3))
	u rm "$img" /s2
	model_rmfile s2
	check "$img" "rm /s2 frees EA inode $inum" $((base + n + nlarge + 1))
	# Remove every other value with setfattr -x, delete the other files.
	for ((i = 0; i < n; i++)); do
		sz=${SIZES[(i + 5) % n]}
		if ((i % 2)); then
			u setfattr "$img" -x user.v "/c$i"
			model_rm "c$i" user.v
		else
			u rm "$img" "/c$i"
			model_rmfile "c$i"
		fi
	done
	u rm "$img" /s1
	model_rmfile s1
	check "$img" "every value removed or its file deleted" $((base + n / 2))
}

# --- FUSE: the same with setfattr(1) / getfattr(1) on a uext4 mount ------------
fuse_rw_mount() { # fuse_rw_mount IMAGE DIR
	local i
	"$UEXT4" mount "$1" "$2" > "$2.log" 2>&1 &
	FUSE_PID=$!
	MOUNTS+=("$2")
	for ((i = 0; i < 300; i++)); do
		[ "$(findmnt -n -o TARGET "$2" 2> /dev/null)" = "$2" ] && return 0
		if ! kill -0 "$FUSE_PID" 2> /dev/null; then
			# The daemon's parent exits once the mount is up: that
			# may be between the two checks, so look once more.
			wait "$FUSE_PID" && [ "$(findmnt -n -o TARGET "$2" 2> /dev/null)" = "$2" ] &&
				return 0
			cat "$2.log"
			return 1
		fi
		sleep 0.1 # polling for the mount to appear, with a 30 s deadline
	done
	cat "$2.log"
	return 1
}
fuse_rw_umount() { # fuse_rw_umount IMAGE DIR: unmount, wait for the write-back
	fuse_umount "$2"
	flock "$1" true # the server holds the image's lock until it is written
}
fuse_part() {
	local img=$T/fuse.img mnt=$T/fmnt base n i sz v inum ref nlarge=0
	note "FUSE mount, 4096-byte blocks, 256-byte inodes"
	rm -rf "$MODEL"
	mkdir -p "$MODEL" "$mnt"
	truncate -s 128M "$img"
	mke2fs -q -F -t ext4 -b 4096 -I 256 -O ea_inode "$img" 2> /dev/null || { bad "mke2fs"; return; }
	base=$(used_inodes "$img")
	n=${#SIZES[@]}
	fuse_rw_mount "$img" "$mnt" || { bad "uext4 mount"; return; }
	for ((i = 0; i < n; i++)); do
		echo x > "$mnt/f$i"
		sz=${SIZES[i]}
		v=$(value "$sz" 2)
		setfattr -n user.v -v "$(b64 "$v")" "$mnt/f$i" || bad "setfattr f$i ($sz bytes)"
		model_set "f$i" user.v "$v"
	done
	for ((i = 0; i < n; i++)); do
		sz=${SIZES[(i + 3) % n]}
		v=$(value "$sz" 3)
		setfattr -n user.v -v "$(b64 "$v")" "$mnt/f$i" || bad "replace f$i ($sz bytes)"
		model_set "f$i" user.v "$v"
		large "$sz" 4096 && nlarge=$((nlarge + 1))
	done
	echo x > "$mnt/s1"
	echo x > "$mnt/s2"
	echo x > "$mnt/s3"
	v=$(value 40000 9)
	for f in s1 s2 s3; do
		setfattr -n user.shared -v "$(b64 "$v")" "$mnt/$f" || bad "setfattr $f"
		model_set "$f" user.shared "$v"
	done
	setfattr -x user.shared "$mnt/s3" || bad "setfattr -x s3"
	model_rm s3 user.shared
	# What the mount itself shows.
	for ((i = 0; i < n; i++)); do
		getfattr --only-values -n user.v "$mnt/f$i" 2> /dev/null | cmp -s - "$MODEL/f$i/user.v" ||
			bad "getfattr on the mount: f$i differs"
	done
	getfattr --only-values -n user.shared "$mnt/s2" 2> /dev/null | cmp -s - "$v" ||
		bad "getfattr on the mount: s2 differs"
	fuse_rw_umount "$img" "$mnt"
	inum=$(ea_inum "$img" /s1 user.shared)
	ref=$(ea_ref "$img" "$inum")
	[ "$inum" != 0 ] && [ "$inum" = "$(ea_inum "$img" /s2 user.shared)" ] && [ "$ref" = 2 ] ||
		bad "FUSE: shared value in EA inodes $inum / $(ea_inum "$img" /s2 user.shared), count $ref"
	check "$img" "FUSE: set, replaced, 40000 bytes shared by s1 s2 (EA inode $inum, count $ref)" \
		$((base + n + 3 + nlarge + 1))
	fuse_rw_mount "$img" "$mnt" || { bad "uext4 mount"; return; }
	rm "$mnt/s1" || bad "rm s1"
	model_rmfile s1
	for ((i = 0; i < n; i += 2)); do
		setfattr -x user.v "$mnt/f$i" || bad "setfattr -x f$i"
		model_rm "f$i" user.v
	done
	rm "$mnt/s2" || bad "rm s2"
	model_rmfile s2
	fuse_rw_umount "$img" "$mnt"
	nlarge=0
	for ((i = 1; i < n; i += 2)); do large "${SIZES[(i + 3) % n]}" 4096 && nlarge=$((nlarge + 1)); done
	check "$img" "FUSE: removed, sharers deleted" $((base + n + 1 + nlarge))
}

# --- values written by e2fsprogs and by the kernel, deleted by uext4 ----------
foreign_part() {
	local img=$T/foreign.img before start km=$T/kmnt v
	note "EA inodes made by e2fsprogs and the kernel, deleted by uext4"
	rm -rf "$MODEL"
	mkdir -p "$MODEL"
	"$TOP/tests/images/mk_ea_inode.sh" "$img" || { bad "mk_ea_inode.sh"; return; }
	before=$(used_inodes "$img")
	fsck_clean "$img" > /dev/null || bad "mk_ea_inode.sh: image not clean to start with"
	u getfattr -n user.big "$img" /f
	grep -q '^user.big=' "$T/out" || bad "uext4 getfattr of the debugfs value: $(head -c 200 "$T/out")"
	u rm "$img" /f
	check "$img" "debugfs's EA inode freed with /f" $((before - 2))
	if [ "$KERNEL" = 0 ]; then
		echo "  kernel-written EA inodes: skipped (no loop device)"
		return
	fi
	mkdir -p "$km"
	start=$(used_inodes "$img")
	kmount "$img" "$km" rw || { bad "kernel rw mount"; return; }
	echo k > "$km/k"
	echo k > "$km/k2"
	v=$(value 8192 5)
	setfattr -n user.k8 -v "$(b64 "$v")" "$km/k" || bad "kernel setfattr 8 KiB"
	setfattr -n user.k8 -v "$(b64 "$v")" "$km/k2" || bad "kernel setfattr 8 KiB on k2"
	setfattr -n user.k64 -v "$(b64 "$(value 65536 6)")" "$km/k" || bad "kernel setfattr 64 KiB"
	kumount "$km"
	model_set k user.k8 "$v"
	model_set k user.k64 "$(value 65536 6)"
	model_set k2 user.k8 "$v"
	check "$img" "kernel's values read by uext4 ($(($(used_inodes "$img") - start - 2)) EA inodes)"
	u rm "$img" /k
	model_rmfile k
	check "$img" "uext4 rm of one kernel file"
	u rm "$img" /k2
	model_rmfile k2
	check "$img" "uext4 rm of the last kernel file: its EA inodes freed" "$start"
}

# --- symlinks: no EA inodes from uext4; the kernel's freed without damage -----
symlink_part() {
	local img=$T/link.img km=$T/kmnt start
	note "symlinks"
	rm -rf "$MODEL"
	mkdir -p "$MODEL"
	truncate -s 64M "$img"
	mke2fs -q -F -t ext4 -b 4096 -O ea_inode "$img" 2> /dev/null || { bad "mke2fs"; return; }
	start=$(used_inodes "$img")
	u ln -s "$img" /some/target /l
	# What a refusal must leave as it was (a read-write CLI command still
	# writes the superblock's mount times and the journal).
	state() {
		debugfs -R "inode_dump /l" "$1" 2> /dev/null
		dumpe2fs -h "$1" 2> /dev/null | grep -E '^Free (blocks|inodes):'
	}
	state "$img" > "$T/link.before"
	# e2fsck 1.47 misreads a fast symlink whose i_blocks has an EA charge:
	# uext4 refuses such values on symlinks, and changes nothing.
	if "$UEXT4" setfattr -h "$img" -n trusted.big -v "$(b64 "$(value 8192 10)")" /l \
		2> "$T/err"; then
		bad "an EA-inode value on a symlink was accepted"
	else
		grep -q 'symlink.*EA inode' "$T/err" || bad "refusal without a clear message: $(cat "$T/err")"
	fi
	state "$img" | cmp -s - "$T/link.before" ||
		bad "the refused setfattr changed the symlink or the free counts"
	check "$img" "EA-inode value on a symlink refused, image unchanged" $((start + 1))
	if [ "$KERNEL" = 0 ]; then
		echo "  kernel-made symlink with an EA inode: skipped (no loop device)"
		return
	fi
	# The kernel does write them; uext4 rm must free such a symlink
	# without taking its target for block numbers.
	mkdir -p "$km"
	kmount "$img" "$km" rw || { bad "kernel rw mount"; return; }
	ln -s /some/other/target "$km/kl"
	setfattr -h -n trusted.big -v "$(b64 "$(value 8192 11)")" "$km/kl" || bad "kernel setfattr -h"
	kumount "$km"
	u rm "$img" /kl /l
	check "$img" "uext4 rm of the kernel's symlink with an EA inode" "$start"
}

# --- case 2: the ext_attr feature ----------------------------------------------
ext_attr_part() {
	local img=$T/noxattr.img v
	note "ext2 without ext_attr, 128-byte inodes"
	rm -rf "$MODEL"
	mkdir -p "$MODEL"
	"$TOP/tests/images/mk_no_ext_attr.sh" "$img" || { bad "mk_no_ext_attr.sh"; return; }
	dumpe2fs -h "$img" 2> /dev/null | grep '^Filesystem features:' | grep -qw ext_attr &&
		bad "mk_no_ext_attr.sh: ext_attr already set"
	v=$(value 200 4)
	u setfattr "$img" -n user.x -v "$(b64 "$v")" /f
	model_set f user.x "$v"
	dumpe2fs -h "$img" 2> /dev/null | grep '^Filesystem features:' | grep -qw ext_attr ||
		bad "uext4 setfattr did not set the ext_attr feature: $(dumpe2fs -h "$img" 2> /dev/null |
			grep '^Filesystem features:')"
	check "$img" "setfattr on ^ext_attr: feature set"
}

if [ -n "${ONLY:-}" ]; then
	$ONLY # one part, for debugging: ONLY="cli_variant 4096 256" tests/ea_inode.sh
else
	cli_variant 4096 256
	cli_variant 1024 128
	if [ "$HAVE_FUSE" = 1 ]; then fuse_part; fi
	foreign_part
	symlink_part
	ext_attr_part
fi

if [ "$FAILS" != 0 ]; then
	echo "ea_inode.sh: $FAILS failures (seed $SEED)"
	exit 1
fi
echo "ea_inode.sh: PASS (seed $SEED)"
