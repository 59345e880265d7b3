/* mountinfo.h - reading /proc/self/mountinfo, shared by the FUSE server and
 * the CLI (the library keeps its own reader: it may not call frontends). */
#ifndef UEXT4_FUSE_MOUNTINFO_H
#define UEXT4_FUSE_MOUNTINFO_H

/* Undo mountinfo's escapes in place: the kernel writes space, tab, newline
 * and backslash in paths as \ooo (three octal digits). */
void mountinfo_unescape(char *s);

#endif
