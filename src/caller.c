/*
 * caller.c - the calling thread's identity and umask, set through the
 * public API (uext4_set_caller(), uext4_set_umask()) and read by every
 * layer that checks permissions or stamps an owner: thread-local, so no
 * lock, and at the bottom so that nothing calls up for it.
 */
#include "caller.h"
#include "uext4.h"

/* Identity of the calling thread (uext4_set_caller()); root by default. */
static _Thread_local uint32_t cur_uid, cur_gid;

void uext4_set_caller(uint32_t uid, uint32_t gid)
{
	cur_uid = uid;
	cur_gid = gid;
}

uint32_t caller_uid(void)
{
	return cur_uid;
}

uint32_t caller_gid(void)
{
	return cur_gid;
}

/* The calling thread's file mode creation mask (uext4_set_umask()). */
static _Thread_local uint32_t cur_umask;

void uext4_set_umask(uint32_t umask)
{
	cur_umask = umask & 0777;
}

uint32_t caller_umask(void)
{
	return cur_umask;
}
