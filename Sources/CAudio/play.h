/*
 * play.c's calls, for the output thread's other files (output.c's loop, standby.c): how
 * frames are played on the device and accounted. The layers: output.c calls standby.c
 * and play.c, standby.c calls play.c, play.c calls only the device and the ring.
 */
#ifndef CAUDIO_PLAY_H
#define CAUDIO_PLAY_H
#include "internal.h"

/* The clock: publishes a ring index as heard (while `playing`, readers extrapolate up to
 * `limit`); or maps the device's position heard now through the segments and publishes it. */
void sm_out_publish_clock(sm_output *o, uint64_t idx, uint64_t limit, int playing);
void sm_out_update_clock(sm_output *o);
/* Frames queued before a frame written now is heard, as the clock reads the device (a
 * card's lagging pointer through its envelope; a sound server's figure asked afresh), and
 * the moment read (*now_ns). For an aligned start. */
long sm_out_queued_now(sm_output *o, uint64_t *now_ns);
/* The device is lost: the error is kept for sm_output_last_error, the output fails. */
void sm_out_fail(sm_output *o, int err, const char *what);

/* Ring frames still to play (those a rewind took back first). */
uint32_t sm_out_pending(sm_output *o);
/* Writes up to n ring frames with the ramp gain; -1 when the device is lost. */
int sm_out_play_ring(sm_output *o, uint32_t n);
/* Leaves out the next n ring frames, all there, else none (returns 0); what follows
 * fades in. */
int sm_out_skip_ring(sm_output *o, uint32_t n);
/* Writes n frames of silence (counted as an underflow when asked); -1 when lost. */
int sm_out_play_silence(sm_output *o, uint32_t n, int count_as_underflow);
/* Takes back queued audio not yet heard, beyond a margin (2 ms when `tight`: zeros follow
 * in the same write; else 2 ms and a ramp): played again from the history. */
void sm_out_take_back(sm_output *o, int tight);
/* Takes back the silence queued after the last audio (a start from the standby, a seek's
 * refill), down to the margin. */
void sm_out_take_back_silence(sm_output *o);
/* The same, at most `most` frames of it; the frames taken back. */
long sm_out_take_back_silence_upto(sm_output *o, long most);
/* Fades out within ~5 ms of what is heard now, then up to `zeros` of silence; sets
 * stop_index. The zeros written, or -1 when the device is lost. */
int sm_out_ramp_out(sm_output *o, uint32_t zeros);
/* Empties the ring (and the history) and wakes the producer. */
void sm_out_flush_ring(sm_output *o);
/* Frames a stream (re)starts with after silence: a tenth of a second, half the ring at most. */
uint32_t sm_out_start_frames(const sm_output *o);
/* Sleeps until `want` frames are in the ring, a request comes or the timeout passes. */
void sm_out_wait_for_data(sm_output *o, uint32_t want, int timeout_ms);

#endif
