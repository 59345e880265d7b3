# uext4 - ext4 in userspace.  See README.md.
#
#   make            release build in build/ (optimized, -DNDEBUG, no lock
#                   validator); the benchmarks use it
#   make BUILD=asan ASan+UBSan build in build/asan/ (debug: lock validator on)
#   make BUILD=tsan TSan build in build/tsan/ (debug: lock validator on)
#   make check      every test (release, asan, tsan), under an hour on 2 cores
#   make check-long every test at full size (the whole write-path sweep, and
#                   the slowest ASan runs, tagged asan-long): ~2 hours
#   make run        install deps, build, make uext4.img, mount it on ./mnt
#   make install    PREFIX (/usr/local) and DESTDIR; make uninstall
#   BUILDDIR=dir    put a build somewhere else (parallel work trees)

BUILD ?= release
# BUILD=fast was the benchmarks' build; it is now the release build.
ifeq ($(BUILD),fast)
  override BUILD := release
endif
CC ?= cc
ifeq ($(BUILD),release)
  B := $(or $(BUILDDIR),build)
  MODE_CFLAGS := -O2 -g -DNDEBUG
else ifeq ($(BUILD),asan)
  B := $(or $(BUILDDIR),build/asan)
  MODE_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -DUEXT4_LOCKDEP
  MODE_LDFLAGS := -fsanitize=address,undefined
else ifeq ($(BUILD),tsan)
  B := $(or $(BUILDDIR),build/tsan)
  MODE_CFLAGS := -O1 -g -fsanitize=thread -DUEXT4_LOCKDEP
  MODE_LDFLAGS := -fsanitize=thread
else ifeq ($(BUILD),fuzz)
  # libFuzzer harnesses (fuzz/): clang, the library with sanitizers and
  # coverage (make fuzz-build)
  CC := clang
  B := $(or $(BUILDDIR),build/fuzz)
  MODE_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined
  MODE_LDFLAGS := -fsanitize=address,undefined
else
  $(error unknown BUILD=$(BUILD): use release, asan, tsan or fuzz)
endif

FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
FUSE_LIBS := $(shell pkg-config --libs fuse3 2>/dev/null || echo -lfuse3)
# FUSE over io_uring (fuse/uring.c): liburing-dev
URING_CFLAGS := $(shell pkg-config --cflags liburing 2>/dev/null)
URING_LIBS := $(shell pkg-config --libs liburing 2>/dev/null || echo -luring)
# Tarballs into images (src/archive.c): libarchive-dev
ARCHIVE_CFLAGS := $(shell pkg-config --cflags libarchive 2>/dev/null)
ARCHIVE_LIBS := $(shell pkg-config --libs libarchive 2>/dev/null || echo -larchive)
# libnbd (src/nbd.c) rides on ARCHIVE_LIBS: every link line with libuext4 has it.
ARCHIVE_LIBS += $(shell pkg-config --libs libnbd 2>/dev/null || echo -lnbd)
# libcrypto (OpenSSL) hashes fs-verity's Merkle trees (src/verity.c).
ARCHIVE_LIBS += $(shell pkg-config --libs libcrypto 2>/dev/null || echo -lcrypto)
WARN := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS := -std=c17 -D_GNU_SOURCE -pthread -fPIC $(WARN) $(MODE_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(MODE_LDFLAGS)

LIB_SRC := $(wildcard src/*.c)
LIB_OBJ := $(patsubst src/%.c,$(B)/obj/src/%.o,$(LIB_SRC))
FUSE_SRC := $(wildcard fuse/*.c)
FUSE_OBJ := $(patsubst fuse/%.c,$(B)/obj/fuse/%.o,$(FUSE_SRC))
CLI_SRC := $(wildcard cli/*.c)
CLI_OBJ := $(patsubst cli/%.c,$(B)/obj/cli/%.o,$(CLI_SRC))
TEST_SRC := $(wildcard tests/*.c)
TEST_BIN := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRC))

# The version, from include/uext4.h; the soname's number is the MAJOR.
VERSION_PART = $(shell sed -n 's/^\#define UEXT4_VERSION_$(1) \([0-9]*\)$$/\1/p' include/uext4.h)
VERSION := $(call VERSION_PART,MAJOR).$(call VERSION_PART,MINOR).$(call VERSION_PART,PATCH)
SO_NAME := libuext4.so.$(call VERSION_PART,MAJOR)
SO_REAL := libuext4.so.$(VERSION)
MAN_PAGES := $(B)/man/uext4.1 $(B)/man/libuext4.3

FUZZ_HARNESS := fuzz_mount fuzz_write fuzz_recovery fuzz_mkfs_tar
FUZZ_BIN := $(patsubst %,$(B)/fuzz/%,$(FUZZ_HARNESS))
FUZZ_SECS ?= 60

.PHONY: all lib check check-long run clean bench bench-each fuzz fuzz-build fuzz-bins man install uninstall
all: $(B)/libuext4.a $(B)/libuext4.so $(B)/uext4 $(B)/uext4.pc $(MAN_PAGES) $(TEST_BIN) $(BENCH_BIN)
lib: $(B)/libuext4.a

$(B)/obj/src/%.o: src/%.c src/*.h src/*.inc include/uext4.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ARCHIVE_CFLAGS) -Iinclude -c $< -o $@

$(B)/obj/fuse/%.o: fuse/%.c fuse/*.h include/uext4.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FUSE_CFLAGS) $(URING_CFLAGS) -Iinclude -c $< -o $@

$(B)/obj/cli/%.o: cli/%.c fuse/*.h include/uext4.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FUSE_CFLAGS) -Iinclude -Ifuse -c $< -o $@

# The installed static library keeps its names to itself, as the shared
# one does with its version script: the objects are linked into one
# (ld -r), every global but uext4_* is made local (objcopy), and the
# archive holds that one object.  A program that links it statically may
# then define its own bread or crc32c.
$(B)/libuext4.a: $(B)/obj/libuext4.o
	@rm -f $@
	ar rcs $@ $<
$(B)/obj/libuext4.o: $(LIB_OBJ)
	$(LD) -r -o $@.tmp $^
	objcopy --wildcard --keep-global-symbol='uext4_*' $@.tmp $@
	@rm -f $@.tmp

# Every object with its global names, for the tests and fuzz harnesses,
# which call internal functions (src/*.h).
$(B)/obj/libuext4-internal.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library: real file libuext4.so.MAJOR.MINOR.PATCH, soname
# libuext4.so.MAJOR, exporting only uext4_* (src/libuext4.map).
$(B)/$(SO_REAL): $(LIB_OBJ) src/libuext4.map
	$(CC) -shared $(LDFLAGS) -Wl,-soname,$(SO_NAME) -Wl,--version-script=src/libuext4.map \
		-Wl,--no-undefined -o $@ $(LIB_OBJ) $(ARCHIVE_LIBS)
$(B)/$(SO_NAME): $(B)/$(SO_REAL)
	ln -sf $(SO_REAL) $@
$(B)/libuext4.so: $(B)/$(SO_NAME)
	ln -sf $(SO_NAME) $@

$(B)/uext4: $(CLI_OBJ) $(FUSE_OBJ) $(B)/libuext4.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(FUSE_OBJ) $(B)/libuext4.a $(FUSE_LIBS) $(URING_LIBS) $(ARCHIVE_LIBS)

# Tests may use internal headers; they link the archive of every object.
$(B)/tests/%: tests/%.c tests/*.h $(B)/obj/libuext4-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude -Isrc -o $@ $< $(B)/obj/libuext4-internal.a $(LDFLAGS) $(ARCHIVE_LIBS)

$(B)/bench/%: bench/%.c fuse/loop.c fuse/uring.c $(B)/libuext4.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FUSE_CFLAGS) $(URING_CFLAGS) -Iinclude -o $@ $< $(B)/libuext4.a $(LDFLAGS) $(FUSE_LIBS) $(URING_LIBS) $(ARCHIVE_LIBS)

# The image harnesses use the structure-aware mutator; the tar one libFuzzer's.
$(B)/fuzz/fuzz_mkfs_tar: fuzz/fuzz_mkfs_tar.c fuzz/common.c fuzz/common.h $(B)/obj/libuext4-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude -Isrc -fsanitize=fuzzer -o $@ $< fuzz/common.c $(B)/obj/libuext4-internal.a $(LDFLAGS) $(ARCHIVE_LIBS)
$(B)/fuzz/%: fuzz/%.c fuzz/common.c fuzz/mutator.c fuzz/common.h $(B)/obj/libuext4-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude -Isrc -fsanitize=fuzzer -o $@ $< fuzz/common.c fuzz/mutator.c $(B)/obj/libuext4-internal.a $(LDFLAGS) $(ARCHIVE_LIBS)
fuzz-bins: $(FUZZ_BIN)
fuzz-build:
	$(MAKE) BUILD=fuzz fuzz-bins
# Each harness FUZZ_SECS seconds on its generated corpus; summary in fuzz/LOG.md.
fuzz: fuzz-build
	fuzz/run.sh $(FUZZ_SECS)

# ------------------------------------------------------------ installation
# Debian/GNU layout: LIBDIR is $(PREFIX)/lib (not the multiarch directory,
# so that one Makefile serves every distribution; Debian packaging passes
# LIBDIR=/usr/lib/$(DEB_HOST_MULTIARCH)).  Every path install writes is in
# INSTALLED, which uninstall removes.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR ?= $(PREFIX)/share/man
INSTALL ?= install

$(B)/uext4.pc: uext4.pc.in include/uext4.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
		-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
		-e 's|@LIBS_PRIVATE@|-pthread $(strip $(ARCHIVE_LIBS))|g' $< > $@.tmp && mv $@.tmp $@
# pkg-config paths depend on PREFIX/LIBDIR: regenerate on every install.
# Libs.private names libarchive itself (not Requires.private: that would
# make --static ask for libarchive's own static dependencies, which Debian's
# libarchive-dev does not pull in).
.PHONY: $(B)/uext4.pc

# Man pages, from the same text as --help (uext4(1)) and as the comments
# of include/uext4.h (libuext4(3)): see scripts/mkman.sh.
$(B)/man/uext4.1: $(B)/uext4 scripts/mkman.sh
	@mkdir -p $(dir $@)
	scripts/mkman.sh uext4 $(B)/uext4 $(VERSION) > $@.tmp && mv $@.tmp $@
$(B)/man/libuext4.3: include/uext4.h scripts/mkman.sh
	@mkdir -p $(dir $@)
	scripts/mkman.sh libuext4 include/uext4.h $(VERSION) > $@.tmp && mv $@.tmp $@
man: $(MAN_PAGES)

INSTALLED = $(BINDIR)/uext4 $(SBINDIR)/mount.fuse.uext4 $(SBINDIR)/umount.fuse.uext4 \
	$(SBINDIR)/umount.uext4 \
	$(LIBDIR)/$(SO_REAL) $(LIBDIR)/$(SO_NAME) $(LIBDIR)/libuext4.so $(LIBDIR)/libuext4.a \
	$(INCLUDEDIR)/uext4.h $(PKGCONFIGDIR)/uext4.pc \
	$(MANDIR)/man1/uext4.1 $(MANDIR)/man3/libuext4.3
install: $(B)/libuext4.a $(B)/$(SO_REAL) $(B)/uext4 $(B)/uext4.pc $(MAN_PAGES)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR) \
		$(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3
	$(INSTALL) -m 755 $(B)/uext4 $(DESTDIR)$(BINDIR)/uext4
	sed 's|@BINDIR@|$(BINDIR)|g' scripts/mount.fuse.uext4 > $(DESTDIR)$(SBINDIR)/mount.fuse.uext4
	chmod 755 $(DESTDIR)$(SBINDIR)/mount.fuse.uext4
	ln -sf mount.fuse.uext4 $(DESTDIR)$(SBINDIR)/umount.fuse.uext4
	ln -sf mount.fuse.uext4 $(DESTDIR)$(SBINDIR)/umount.uext4
	$(INSTALL) -m 755 $(B)/$(SO_REAL) $(DESTDIR)$(LIBDIR)/$(SO_REAL)
	ln -sf $(SO_REAL) $(DESTDIR)$(LIBDIR)/$(SO_NAME)
	ln -sf $(SO_NAME) $(DESTDIR)$(LIBDIR)/libuext4.so
	$(INSTALL) -m 644 $(B)/libuext4.a $(DESTDIR)$(LIBDIR)/libuext4.a
	$(INSTALL) -m 644 include/uext4.h $(DESTDIR)$(INCLUDEDIR)/uext4.h
	$(INSTALL) -m 644 $(B)/uext4.pc $(DESTDIR)$(PKGCONFIGDIR)/uext4.pc
	$(INSTALL) -m 644 $(B)/man/uext4.1 $(DESTDIR)$(MANDIR)/man1/uext4.1
	$(INSTALL) -m 644 $(B)/man/libuext4.3 $(DESTDIR)$(MANDIR)/man3/libuext4.3
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))

check:
	$(MAKE) BUILD=release all
	$(MAKE) BUILD=asan all
	$(MAKE) BUILD=tsan all
	JOBS=$${JOBS:-2} tests/run.sh

check-long:
	UEXT4_LONG=1 $(MAKE) check

run:
	scripts/run.sh

# The report (BENCHMARKS.md and bench/plots/), every system and workload.
bench:
	$(MAKE) BUILD=release all
	bench/report.sh

# Each benchmark script on its own, with its own text output (bench/results/).
bench-each:
	$(MAKE) BUILD=release all
	bench/run.sh

clean:
	rm -rf build
