/*
 * CAudio's diagnostics leaf (diag.h): an sm_error filled in one place.
 */
#include "diag.h"

#include <stdarg.h>
#include <stdio.h>

void sm_set_error(sm_error *e, int code, int alsa_errno, const char *fmt, ...) {
    if (!e) return;
    e->code = code;
    e->alsa_errno = alsa_errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}
