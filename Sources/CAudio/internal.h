#ifndef CAUDIO_INTERNAL_H
#define CAUDIO_INTERNAL_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct sm_ring {
    /* Producer and consumer indices on their own cache lines. */
    _Alignas(64) _Atomic uint64_t write_index;
    _Alignas(64) _Atomic uint64_t read_index;
    _Alignas(64) float *data;
    uint32_t capacity;
    uint32_t mask;
    uint32_t channels;
};

/* Native PulseAudio playback (pulse.c), driven by the output thread like an ALSA PCM.
 * States are SND_PCM_STATE_* values; errors are negative errno values. */
typedef struct sm_pulse sm_pulse;
int sm_pulse_available(void);
/* Connects to the server and opens a float stereo stream on `sink` (NULL: the default
 * sink). The buffer and period are asked for and updated to what the server gave.
 * Underruns while running are counted in *underflows. NULL with `message` on failure. */
sm_pulse *sm_pulse_open(const char *sink, uint32_t rate, uint32_t *buffer_frames, uint32_t *period_frames,
                        _Atomic uint32_t *underflows, char *message, size_t message_size);
void sm_pulse_close(sm_pulse *p);
const char *sm_pulse_error(const sm_pulse *p);
int sm_pulse_state(sm_pulse *p);
long sm_pulse_avail(sm_pulse *p);
long sm_pulse_write(sm_pulse *p, const float *frames, uint32_t n);
int sm_pulse_delay(sm_pulse *p, long *frames);
long sm_pulse_rewindable(sm_pulse *p);
long sm_pulse_rewind(sm_pulse *p, unsigned long frames);
int sm_pulse_pause(sm_pulse *p, int enable);
int sm_pulse_drop(sm_pulse *p);
int sm_pulse_prepare(sm_pulse *p);
int sm_pulse_drain(sm_pulse *p);
#endif
