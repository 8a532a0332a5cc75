/*
 * The device-name policy: which backend plays a device name.
 *
 *   "pulse", "pulse:SINK"  a native PulseAudio stream (pulse.c) on the default sink or
 *                          SINK; "pulse" goes through ALSA's plugin only when libpulse
 *                          is missing
 *   "snapcast", "snapcast:/PATH"  snapserver's pipe source (fifo.c) at /tmp/snapfifo or
 *                          PATH, for Snapcast's clients in several rooms
 *   "alsa:NAME"            the ALSA PCM NAME, whatever it is called
 *   anything else          the ALSA PCM of that name (alsa.c); when it leads to ALSA's
 *                          PulseAudio plugin (as "default" does on a desktop), the same
 *                          server's default sink natively instead, where a pause can take
 *                          back what is queued (the plugin stays if that fails)
 *
 * sm_backend_warm loads ahead, on a thread of its own, what the first open of a name
 * needs (the daemon calls it when it starts); an open waits until it is done. A third
 * backend is a file of its own (the calls of backend.h) and a name here.
 */
#define _GNU_SOURCE
#include "backend.h"
#include "diag.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A device name as the policy above reads it. */
typedef struct device_name {
    const char *name;   /* the ALSA PCM's name ("alsa:" taken off), or the name itself */
    const char *sink;   /* the sink of "pulse:SINK" (NULL: the default sink) */
    int pulse;          /* 2: a native stream; 1: one if libpulse loads ("pulse"); 0: ALSA */
    int forced_alsa;    /* "alsa:NAME": ALSA even where it leads to the PulseAudio plugin */
    int snapcast;       /* "snapcast[:PATH]": the pipe at `sink` (NULL: the default path) */
} device_name;

static device_name read_name(const char *device) {
    device_name d = { (device && *device) ? device : "default", NULL, 0, 0, 0 };
    if (strcmp(d.name, "snapcast") == 0) {
        d.snapcast = 1;
    } else if (strncmp(d.name, "snapcast:", 9) == 0 && d.name[9]) {
        d.snapcast = 1;
        d.sink = d.name + 9;
    } else if (strncmp(d.name, "alsa:", 5) == 0 && d.name[5]) {
        d.name += 5;
        d.forced_alsa = 1;
    } else if (strcmp(d.name, "pulse") == 0) {
        d.pulse = 1;
    } else if (strncmp(d.name, "pulse:", 6) == 0) {
        d.pulse = 2;
        d.sink = d.name[6] ? d.name + 6 : NULL;
    }
    return d;
}

/* Whether `d` plays through a native PulseAudio stream (loads libpulse for "pulse"). */
static int plays_native(device_name d) {
    return d.pulse == 2 || (d.pulse == 1 && sm_pulse_available());
}

/* Warm-ups running (sm_backend_warm): an open waits for them, so that two threads never
 * expand ALSA's configuration at once (its hooks change the shared tree). */
static pthread_mutex_t warm_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t warm_done;        /* on CLOCK_MONOTONIC (sm_backend_warm_finish) */
static pthread_once_t warm_once = PTHREAD_ONCE_INIT;
static int warming;

static void warm_init(void) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&warm_done, &a);
    pthread_condattr_destroy(&a);
}

static void warm_finished(void) {
    pthread_once(&warm_once, warm_init);
    pthread_mutex_lock(&warm_mutex);
    warming--;
    pthread_cond_broadcast(&warm_done);
    pthread_mutex_unlock(&warm_mutex);
}

static void wait_warm(void) {
    pthread_once(&warm_once, warm_init);
    pthread_mutex_lock(&warm_mutex);
    while (warming > 0) pthread_cond_wait(&warm_done, &warm_mutex);
    pthread_mutex_unlock(&warm_mutex);
}

int sm_backend_warm_finish(int timeout_ms) {
    if (timeout_ms < 0) timeout_ms = 0;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_once(&warm_once, warm_init);
    pthread_mutex_lock(&warm_mutex);
    int err = 0;
    while (warming > 0 && err == 0) err = pthread_cond_timedwait(&warm_done, &warm_mutex, &until);
    int done = warming == 0;
    pthread_mutex_unlock(&warm_mutex);
    return done;
}

static void *warm(void *arg) {
    char *device = arg;
    device_name d = read_name(device);
    if (!d.snapcast && !plays_native(d)) sm_alsa_warm(d.name);   /* a pulse name has loaded libpulse by now */
    free(device);
    warm_finished();
    return NULL;
}

int sm_backend_warm(const char *device) {
    char *copy = strdup(device ? device : "");
    if (!copy) return -1;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) {
        free(copy);
        return -1;
    }
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_once(&warm_once, warm_init);
    pthread_mutex_lock(&warm_mutex);
    warming++;
    pthread_mutex_unlock(&warm_mutex);
    pthread_t t;
    int err = pthread_create(&t, &attr, warm, copy);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        free(copy);
        warm_finished();
        return -1;
    }
    return 0;
}

/* A native stream, its failure named after the device asked for. */
static sm_backend *open_pulse(const sm_backend_config *c, const char *shown, sm_error *e) {
    sm_error why = { 0 };
    sm_backend *b = sm_pulse_open(c, &why);
    if (!b && e) {
        sm_set_error(e, why.code, why.alsa_errno, "cannot open PulseAudio device '%s': %s", shown, why.message);
        e->sound_server = 1;
    }
    return b;
}

sm_backend *sm_backend_open(const char *device, uint32_t rate, uint32_t buffer_us, uint32_t periods,
                            int raise_threads, char *shown, size_t shown_size, sm_error *e) {
    wait_warm();
    device_name d = read_name(device);
    snprintf(shown, shown_size, "%s", d.name);
    if (d.snapcast) {
        sm_backend_config f = { .name = d.sink, .rate = rate, .buffer_us = buffer_us, .periods = periods,
                                .raise_threads = raise_threads };
        return sm_fifo_open(&f, e);
    }
    int pulse = plays_native(d);
    sm_backend_config c = { .name = pulse ? d.sink : d.name, .rate = rate, .buffer_us = buffer_us,
                            .periods = periods, .raise_threads = raise_threads };
    if (pulse) return open_pulse(&c, shown, e);

    sm_backend *b = sm_alsa_open(&c, e);
    if (b && !d.forced_alsa && sm_alsa_is_pulse_plugin(b) && sm_pulse_available()) {
        sm_backend_config native = c;
        native.name = NULL;
        sm_backend *n = sm_pulse_open(&native, NULL);
        if (n) {
            sm_backend_close(b);
            b = n;
        }
    }
    return b;
}
