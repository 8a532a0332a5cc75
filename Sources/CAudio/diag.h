/*
 * CAudio's diagnostics leaf: how a failure becomes an sm_error (a code, the errno, one
 * line of text). Every other file of CAudio may call it; it calls none of theirs.
 */
#ifndef CAUDIO_DIAG_H
#define CAUDIO_DIAG_H
#include "caudio.h"

/* Fills `e` (NULL: nothing). */
void sm_set_error(sm_error *e, int code, int alsa_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
