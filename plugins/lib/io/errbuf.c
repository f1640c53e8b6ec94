/* errbuf.c: the message a failing function of the common library writes into
 * its caller's buffer. */
#include <stdarg.h>
#include <stdio.h>

#include "plio.h"

void
plc_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}
