# uext4 - ext4 in userspace.  See README.md.
#
#   make            release build in build/
#   make BUILD=asan ASan+UBSan build in build/asan/
#   make BUILD=tsan TSan build in build/tsan/
#   make check      every test (release, asan, tsan)
#   make run        install deps, build, make uext4.img, mount it on ./mnt
#   BUILDDIR=dir    put a build somewhere else (parallel work trees)

BUILD ?= release
CC ?= cc
ifeq ($(BUILD),release)
  B := $(or $(BUILDDIR),build)
  MODE_CFLAGS := -O2 -g -DUEXT4_LOCKDEP
else ifeq ($(BUILD),asan)
  B := $(or $(BUILDDIR),build/asan)
  MODE_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -DUEXT4_LOCKDEP
  MODE_LDFLAGS := -fsanitize=address,undefined
else ifeq ($(BUILD),tsan)
  B := $(or $(BUILDDIR),build/tsan)
  MODE_CFLAGS := -O1 -g -fsanitize=thread -DUEXT4_LOCKDEP
  MODE_LDFLAGS := -fsanitize=thread
else ifeq ($(BUILD),fast)
  B := $(or $(BUILDDIR),build/fast)
  MODE_CFLAGS := -O2 -g -DNDEBUG
else ifeq ($(BUILD),fuzz)
  # libFuzzer harnesses (fuzz/): clang, the library with sanitizers and
  # coverage (make fuzz-build)
  CC := clang
  B := $(or $(BUILDDIR),build/fuzz)
  MODE_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined
  MODE_LDFLAGS := -fsanitize=address,undefined
else
  $(error unknown BUILD=$(BUILD): use release, asan, tsan, fast or fuzz)
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

FUZZ_HARNESS := fuzz_mount fuzz_write fuzz_recovery fuzz_mkfs_tar
FUZZ_BIN := $(patsubst %,$(B)/fuzz/%,$(FUZZ_HARNESS))
FUZZ_SECS ?= 60

.PHONY: all lib check run clean bench bench-each fuzz fuzz-build fuzz-bins
all: $(B)/libuext4.a $(B)/libuext4.so $(B)/uext4 $(TEST_BIN) $(BENCH_BIN)
lib: $(B)/libuext4.a

$(B)/obj/src/%.o: src/%.c src/*.h include/uext4.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ARCHIVE_CFLAGS) -Iinclude -c $< -o $@

$(B)/obj/fuse/%.o: fuse/%.c fuse/*.h include/uext4.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FUSE_CFLAGS) $(URING_CFLAGS) -Iinclude -c $< -o $@

$(B)/obj/cli/%.o: cli/%.c fuse/*.h include/uext4.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FUSE_CFLAGS) -Iinclude -Ifuse -c $< -o $@

$(B)/libuext4.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/libuext4.so: $(LIB_OBJ)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(ARCHIVE_LIBS)

$(B)/uext4: $(CLI_OBJ) $(FUSE_OBJ) $(B)/libuext4.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(FUSE_OBJ) $(B)/libuext4.a $(FUSE_LIBS) $(URING_LIBS) $(ARCHIVE_LIBS)

# Tests may use internal headers; they link the static library.
$(B)/tests/%: tests/%.c tests/*.h $(B)/libuext4.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude -Isrc -o $@ $< $(B)/libuext4.a $(LDFLAGS) $(ARCHIVE_LIBS)

$(B)/bench/%: bench/%.c fuse/loop.c fuse/uring.c $(B)/libuext4.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FUSE_CFLAGS) $(URING_CFLAGS) -Iinclude -o $@ $< $(B)/libuext4.a $(LDFLAGS) $(FUSE_LIBS) $(URING_LIBS) $(ARCHIVE_LIBS)

# The image harnesses use the structure-aware mutator; the tar one libFuzzer's.
$(B)/fuzz/fuzz_mkfs_tar: fuzz/fuzz_mkfs_tar.c fuzz/common.c fuzz/common.h $(B)/libuext4.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude -Isrc -fsanitize=fuzzer -o $@ $< fuzz/common.c $(B)/libuext4.a $(LDFLAGS) $(ARCHIVE_LIBS)
$(B)/fuzz/%: fuzz/%.c fuzz/common.c fuzz/mutator.c fuzz/common.h $(B)/libuext4.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude -Isrc -fsanitize=fuzzer -o $@ $< fuzz/common.c fuzz/mutator.c $(B)/libuext4.a $(LDFLAGS) $(ARCHIVE_LIBS)
fuzz-bins: $(FUZZ_BIN)
fuzz-build:
	$(MAKE) BUILD=fuzz fuzz-bins
# Each harness FUZZ_SECS seconds on its generated corpus; summary in fuzz/LOG.md.
fuzz: fuzz-build
	fuzz/run.sh $(FUZZ_SECS)

check:
	$(MAKE) BUILD=release all
	$(MAKE) BUILD=asan all
	$(MAKE) BUILD=tsan all
	tests/run.sh

run:
	scripts/run.sh

# The report (BENCHMARKS.md and bench/plots/), every system and workload.
bench:
	$(MAKE) BUILD=fast all
	bench/report.sh

# Each benchmark script on its own, with its own text output (bench/results/).
bench-each:
	$(MAKE) BUILD=fast all
	bench/run.sh

clean:
	rm -rf build
