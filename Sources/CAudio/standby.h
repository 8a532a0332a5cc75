/*
 * standby.c's calls, for output.c's loop and request handling: the standby between
 * sessions (SM_REQ_STANDBY), the device kept open and running on silence.
 */
#ifndef CAUDIO_STANDBY_H
#define CAUDIO_STANDBY_H
#include "internal.h"

/* The session is over; the device stays open and running on silence. */
void sm_standby_enter(sm_output *o);
/* One turn: tops the device up with silence, then sleeps a period. */
void sm_standby_keep(sm_output *o);
/* Frames came: the stream plays them, the queued silence taken back where it can be. */
void sm_standby_leave(sm_output *o);

#endif
