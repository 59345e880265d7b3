/* mountinfo.c - see mountinfo.h. */
#include "mountinfo.h"

static int is_octal(char c, char max)
{
	return c >= '0' && c <= max;
}

void mountinfo_unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && is_octal(s[1], '3') && is_octal(s[2], '7') && is_octal(s[3], '7')) {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}
