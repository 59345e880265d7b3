/*
 * reqstats.h - the FUSE server's request statistics: requests per opcode
 * and their latency (from the loop handing the request over to the reply
 * being written), counted only while statistics are on.
 */
#ifndef UEXT4_FUSE_REQSTATS_H
#define UEXT4_FUSE_REQSTATS_H

#include <stddef.h>

void reqstats_enable(int on);
int reqstats_enabled(void);
void reqstats_reset(void);
/* The loop's hooks: a request as the kernel sent it (fuse_in_header
 * first), and a reply's fuse_out_header, on the thread serving it. */
void reqstats_request(const void *in_header);
void reqstats_replied(const void *out_header);
/* The section as text, or JSON ("\"fuse\":{...}", to go inside the
 * library's object).  snprintf's contract. */
int reqstats_format(char *buf, size_t len, int json);

#endif
