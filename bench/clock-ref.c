/*
 * clock-ref: the reference for the audio clock's drift (bench/paced.sh). A plain libpulse
 * client that plays a quiet tone on the default sink for SECONDS and measures its own clock
 * the way `stillmoment-bench play` measures the engine's: the frames it has written less the
 * stream's latency (pa_simple_get_latency: libpulse's interpolated timing), against
 * CLOCK_MONOTONIC, from 5 s in. Run beside the engine on the same sink, it says how far the
 * sink's own rate is from CLOCK_MONOTONIC: a clock that follows the device can do no better.
 *
 *   cc -O2 -o clock-ref bench/clock-ref.c -lpulse-simple -lpulse -lm
 *   clock-ref SECONDS      prints "clock: audio A s, wall W s, drift D ms"
 */
#include <math.h>
#include <pulse/error.h>
#include <pulse/simple.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RATE 44100
#define CHUNK (RATE / 50) /* 20 ms a write */

static double monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    char *end = NULL;
    double seconds = argc == 2 ? strtod(argv[1], &end) : 0;
    if (argc != 2 || *end || !(seconds > 10 && seconds < 86400)) {
        fprintf(stderr, "usage: clock-ref SECONDS (more than 10)\n");
        return 2;
    }
    const pa_sample_spec spec = { .format = PA_SAMPLE_FLOAT32LE, .rate = RATE, .channels = 2 };
    /* The engine's native stream: a 500-ms buffer, requests of a quarter of it. */
    const pa_buffer_attr attr = { .maxlength = (uint32_t)-1, .tlength = RATE / 2 * 8, .prebuf = (uint32_t)-1,
                                  .minreq = RATE / 8 * 8, .fragsize = (uint32_t)-1 };
    int err = 0;
    pa_simple *s = pa_simple_new(NULL, "clock-ref", PA_STREAM_PLAYBACK, NULL, "reference clock", &spec, NULL,
                                 &attr, &err);
    if (!s) {
        fprintf(stderr, "clock-ref: %s\n", pa_strerror(err));
        return 1;
    }
    static float buf[CHUNK * 2];
    const uint64_t total = (uint64_t)(seconds * RATE), settle = 5 * RATE;
    uint64_t written = 0, p0 = 0, p1 = 0;
    double t0 = 0, t1 = 0;
    int started = 0;
    while (written < total) {
        for (int i = 0; i < CHUNK; i++) {
            float v = 0.01f * (float)sin(2.0 * M_PI * 440.0 * (double)(written + (uint64_t)i) / RATE);
            buf[2 * i] = buf[2 * i + 1] = v;
        }
        if (pa_simple_write(s, buf, sizeof buf, &err) < 0) {
            fprintf(stderr, "clock-ref: %s\n", pa_strerror(err));
            return 1;
        }
        written += CHUNK;
        pa_usec_t latency = pa_simple_get_latency(s, &err);
        if (latency == (pa_usec_t)-1) continue;
        const double t = monotonic();
        const uint64_t queued = (uint64_t)((double)latency * RATE / 1e6);
        const uint64_t heard = written > queued ? written - queued : 0;
        if (!started && heard >= settle) {
            started = 1;
            p0 = p1 = heard;
            t0 = t1 = t;
        } else if (started && heard > p1) {
            p1 = heard;
            t1 = t;
        }
    }
    pa_simple_free(s);
    if (!started) {
        fprintf(stderr, "clock-ref: nothing was heard in %g s\n", seconds);
        return 1;
    }
    const double audio = (double)(p1 - p0) / RATE, wall = t1 - t0;
    printf("clock: audio %.6f s, wall %.6f s, drift %.3f ms\n", audio, wall, (audio - wall) * 1000);
    return 0;
}
