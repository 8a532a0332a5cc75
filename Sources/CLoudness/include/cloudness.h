/*
 * CLoudness: the offline loudness meter (meter.c), used when a meditation is imported.
 * Apart from the real-time audio target: it never runs on the output thread.
 */
#ifndef CLOUDNESS_H
#define CLOUDNESS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Integrated loudness and true peak of a whole programme, in one pass (meter.c).
 *
 * Loudness: ITU-R BS.1770-4 / EBU R128 (K-weighting, 400-ms blocks with 75 % overlap,
 * absolute gate -70 LUFS, relative gate -10 LU); agrees with libebur128's
 * EBUR128_MODE_I to about 1e-10 LU. Channel weights follow libebur128's default map:
 * L R C LFE Ls Rs = 1 1 1 0 1.41 1.41; four channels are L R Ls Rs, five L R C Ls Rs.
 *
 * True peak: BS.1770-4 Annex 2, 4x oversampling with the standard's 48-tap filter: the
 * largest of |samples| and |interpolated values| between them. Equals oversampling
 * everything (to float rounding), though only blocks that could hold a new peak are
 * oversampled. The standard's filter reads up to ~0.2 dB above a pure tone's crest
 * above a few kHz, and its grid (1/8, 3/8, 5/8, 7/8 of a sample) can miss a crest by
 * 1/8 sample; libebur128's own filter reads such signals a few tenths of a dB apart.
 *
 * Memory: about 4 KB per channel, plus 8 bytes per 100 ms of programme louder than
 * -70 LUFS (0.3 MB per hour). No shared state between meters; a meter is used from
 * one thread at a time. */

typedef struct sm_meter sm_meter;

/* 1 to 8 channels, 8000 to 192000 Hz. NULL on bad arguments or out of memory. */
sm_meter *sm_meter_new(int channels, int sample_rate);
/* Interleaved frames, in any number of calls of any size. */
void sm_meter_add(sm_meter *m, const float *interleaved, size_t frames);
/* Integrated loudness in LUFS. Returns 0; -1 when no block passed the gates (silence,
 * or less than 400 ms of audio); -2 if memory ran out for the block energies. */
int sm_meter_loudness(const sm_meter *m, double *lufs);
/* Linear true peak, the largest over the channels, of everything added so far (the
 * signal taken to end with the last frame added; adding more afterwards is fine). */
double sm_meter_true_peak(const sm_meter *m);
void sm_meter_free(sm_meter *m);

#ifdef __cplusplus
}
#endif

#endif
