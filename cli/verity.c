/*
 * verity.c - `uext4 verity enable|measure|dump`: fs-verity on files in an
 * image (uext4_verity_enable, _measure, _read_metadata), with the options
 * and output of fsverity-utils' `fsverity enable` and `fsverity measure`.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SIG 16128

struct enable_args {
	struct uext4_verity_enable e;
	uint8_t salt[32];
	uint8_t *sig;
};

static int parse_salt(const struct command *c, const char *hex, struct enable_args *a)
{
	size_t n = strlen(hex);

	if (n % 2 || n / 2 > sizeof(a->salt))
		return usage_error(c, "--salt takes an even number of hex digits, at most 64");
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return usage_error(c, "--salt takes hex digits");
		a->salt[i] = (uint8_t)(hi << 4 | lo);
	}
	a->e.salt = a->salt;
	a->e.salt_size = (uint32_t)(n / 2);
	return 0;
}

static int read_sig(const struct command *c, const char *path, struct enable_args *a)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return fail_host(c, path, errno);
	a->sig = malloc(MAX_SIG + 1);
	n = a->sig ? read(fd, a->sig, MAX_SIG + 1) : -1;
	close(fd);
	if (n < 0)
		return fail_host(c, path, a->sig ? errno : ENOMEM);
	if (n > MAX_SIG)
		return usage_error(c, "the signature is larger than 16128 bytes");
	a->e.sig = a->sig;
	a->e.sig_size = (uint32_t)n;
	return 0;
}

/* --hash-alg=, --block-size=, --salt=, --signature= (fsverity's names). */
static int parse_enable_opt(const struct command *c, const char *arg, struct enable_args *a)
{
	const char *v = strchr(arg, '=');

	if (!v)
		return usage_error(c, "options take a value: --name=VALUE");
	v++;
	if (!strncmp(arg, "--hash-alg=", 11)) {
		if (!strcmp(v, "sha256"))
			a->e.hash_algorithm = UEXT4_VERITY_SHA256;
		else if (!strcmp(v, "sha512"))
			a->e.hash_algorithm = UEXT4_VERITY_SHA512;
		else
			return usage_error(c, "--hash-alg is sha256 or sha512");
		return 0;
	}
	if (!strncmp(arg, "--block-size=", 13)) {
		char *end;
		unsigned long bs = strtoul(v, &end, 10);

		if (*end || !bs || bs > 65536)
			return usage_error(c, "--block-size takes a number of bytes");
		a->e.block_size = (uint32_t)bs;
		return 0;
	}
	if (!strncmp(arg, "--salt=", 7))
		return parse_salt(c, v, a);
	if (!strncmp(arg, "--signature=", 12))
		return read_sig(c, v, a);
	return usage_error(c, "unknown option");
}

static int verity_enable(const struct command *c, int argc, char **argv)
{
	struct enable_args a = {0};
	uext4_fs *fs;
	uint64_t ino;
	int i = 0, ret;

	for (; i < argc && !strncmp(argv[i], "--", 2); i++)
		if ((ret = parse_enable_opt(c, argv[i], &a))) {
			free(a.sig);
			return ret;
		}
	if (argc - i != 2) {
		free(a.sig);
		return usage_error(c, "enable takes IMAGE and PATH");
	}
	if (open_image_rw(c, argv[i], &fs)) {
		free(a.sig);
		return 1;
	}
	ret = resolve(c, fs, argv[i + 1], 1, &ino, NULL);
	if (!ret && (ret = uext4_verity_enable(fs, ino, &a.e)) < 0)
		ret = fail(c, argv[i + 1], ret);
	free(a.sig);
	return close_image(c, argv[i], fs, ret ? 1 : 0);
}

/* "sha256:HEX PATH", as fsverity measure prints it. */
static int verity_measure(const struct command *c, int argc, char **argv)
{
	uext4_fs *fs;
	int status = 0;

	if (argc < 2)
		return usage_error(c, "measure takes IMAGE and PATH...");
	if (open_image(c, argv[0], &fs))
		return 1;
	for (int i = 1; i < argc; i++) {
		struct uext4_verity_digest d;
		uint64_t ino;
		int ret;

		if (resolve(c, fs, argv[i], 1, &ino, NULL)) {
			status = 1;
			continue;
		}
		if ((ret = uext4_verity_measure(fs, ino, &d)) < 0) {
			status = fail(c, argv[i], ret);
			continue;
		}
		printf("%s:", d.algorithm == UEXT4_VERITY_SHA512 ? "sha512" : "sha256");
		for (unsigned j = 0; j < d.size; j++)
			printf("%02x", d.digest[j]);
		printf(" %s\n", argv[i]);
	}
	return close_image(c, argv[0], fs, status);
}

/* The raw Merkle tree, descriptor or signature to stdout
 * (fsverity dump_metadata). */
static int verity_dump(const struct command *c, int argc, char **argv)
{
	static const char *const types[] = {"merkle_tree", "descriptor", "signature"};
	int type = 0, status = 0;
	uint64_t ino, off = 0;
	char buf[65536];
	uext4_fs *fs;
	ssize_t n;

	if (argc != 3)
		return usage_error(c, "dump takes TYPE IMAGE PATH");
	for (int t = 0; t < 3; t++)
		if (!strcmp(argv[0], types[t]))
			type = t + 1;
	if (!type)
		return usage_error(c, "TYPE is merkle_tree, descriptor or signature");
	if (open_image(c, argv[1], &fs))
		return 1;
	if (resolve(c, fs, argv[2], 1, &ino, NULL))
		return close_image(c, argv[1], fs, 1);
	while ((n = uext4_verity_read_metadata(fs, ino, type, off, buf, sizeof(buf))) > 0) {
		if (write_all(STDOUT_FILENO, buf, (size_t)n)) {
			status = fail_host(c, "stdout", errno);
			break;
		}
		off += (uint64_t)n;
	}
	if (n < 0)
		status = fail(c, argv[2], n);
	return close_image(c, argv[1], fs, status);
}

int cmd_verity(const struct command *c, int argc, char **argv)
{
	if (argc < 2)
		return usage_error(c, "missing enable, measure or dump");
	if (!strcmp(argv[1], "enable"))
		return verity_enable(c, argc - 2, argv + 2);
	if (!strcmp(argv[1], "measure"))
		return verity_measure(c, argc - 2, argv + 2);
	if (!strcmp(argv[1], "dump"))
		return verity_dump(c, argc - 2, argv + 2);
	return usage_error(c, "the subcommand is enable, measure or dump");
}
