/*
 * fc_fault.c - helper of tests/fc_replay.sh: `fc_fault IMAGE N` recovers
 * IMAGE (uext4_recover()) with the fast-commit replay failing with EIO
 * before its N-th tag (FAULT_FC_REPLAY, src/fault.h).  Prints what the
 * recovery said.  Exit 0 when the recovery failed and named why, 1 when it
 * succeeded or failed without a message, 2 on bad usage.
 */
#include "fault.h"
#include "uext4.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct uext4_recovery r;
	int err;

	if (argc != 3) {
		fprintf(stderr, "usage: fc_fault IMAGE N\n");
		return 2;
	}
	memset(&r, 0, sizeof(r));
	fault_inject_arm(FAULT_FC_REPLAY, (unsigned)strtoul(argv[2], NULL, 0), EIO);
	err = uext4_recover(argv[1], &r);
	fault_inject_disarm();
	if (err == 0) {
		printf("fc_fault: the recovery succeeded (%u fast commits): the fault did not fire\n",
		       r.fast_commits);
		return 1;
	}
	printf("fc_fault: refused: %s\n", uext4_last_error());
	return uext4_last_error()[0] ? 0 : 1;
}
