/*
 * The output's control side: opening the device (through the device-name policy,
 * device.c) and everything the output thread needs, starting and stopping the thread,
 * and what other threads call while it runs: requests and their waits, the clock, the
 * statistics, and the producer's wake-ups (a futex each way, no lock).
 */
#define _GNU_SOURCE
#include "caudio.h"
#include "internal.h"
#include "priority.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ open */

sm_output *sm_output_open(const sm_output_config *c, sm_error *e) {
    if (e) memset(e, 0, sizeof *e);
    sm_output *o = calloc(1, sizeof *o);
    if (!o) { sm_set_error(e, SM_ERR_MEMORY, 0, "out of memory"); return NULL; }
    sm_output_config defaults = { 0 };
    if (!c) c = &defaults;
    o->want_realtime = c == &defaults ? 1 : c->want_realtime;
    o->rt_priority = c->rt_priority > 0 ? c->rt_priority : 50;
    atomic_init(&o->st_realtime, -1);

    o->dev = sm_backend_open(c->device, c->rate, c->buffer_us, c->periods, o->want_realtime, o->device, sizeof o->device, e);
    if (!o->dev) { sm_output_close(o); return NULL; }
    const sm_backend_info *dev = &o->dev->info;
    o->info.rate = dev->rate;
    o->info.channels = SM_CHANNELS;
    o->info.buffer_frames = dev->buffer_frames;
    o->info.period_frames = dev->period_frames;
    o->info.format = dev->format;
    o->info.can_pause = o->dev->ops->pause != NULL;
    o->info.can_rewind = o->dev->ops->rewind != NULL;

    uint32_t ring_frames = c->ring_frames ? c->ring_frames : o->info.rate;
    if (ring_frames < 2 * o->info.buffer_frames) ring_frames = 2 * o->info.buffer_frames;
    o->ring = sm_ring_create(ring_frames, SM_CHANNELS);
    o->info.ring_frames = o->ring ? sm_ring_capacity(o->ring) : 0;
    o->ramp_frames = sm_ramp_frames(o->info.rate);
    o->pause_tail = dev->pause_tail_frames ? dev->pause_tail_frames : o->ramp_frames;
    o->pause_left = dev->pause_tail_frames ? dev->pause_left_frames : o->ramp_frames;
    o->resume_lead = dev->resume_lead_frames;
    uint32_t chunk = o->info.period_frames > o->ramp_frames ? o->info.period_frames : o->ramp_frames;
    o->chunk_frames = chunk;
    o->fbuf = calloc((size_t)chunk * SM_CHANNELS, sizeof(float));
    o->obuf = calloc((size_t)chunk * SM_CHANNELS, sm_format_bytes(o->info.format));
    o->hist_cap = 1;
    while (o->hist_cap < o->info.buffer_frames + chunk) o->hist_cap <<= 1;
    o->hist = calloc((size_t)o->hist_cap * SM_CHANNELS, sizeof(float));
    o->hist_gain = calloc((size_t)o->hist_cap, sizeof(float));
    if (!o->ring || !o->fbuf || !o->obuf || !o->hist || !o->hist_gain) {
        sm_set_error(e, SM_ERR_MEMORY, 0, "out of memory for the audio buffers");
        sm_output_close(o);
        return NULL;
    }
    o->gain = 1.0f;
    o->gain_target = 1.0f;
    o->gain_step = 1.0f / (float)o->ramp_frames;
    o->dither = 0x12345678u;
    o->state = OUT_PLAYING;
    return o;
}

/* ------------------------------------------------------------ the thread and its clients */

int sm_output_start(sm_output *o, sm_error *e) {
    if (o->thread_started) return 0;
    int err = pthread_create(&o->thread, NULL, sm_output_thread_main, o);
    if (err) { sm_set_error(e, SM_ERR_THREAD, 0, "cannot start the audio output thread: %s", strerror(err)); return -1; }
    o->thread_started = 1;
    return 0;
}

void sm_output_close(sm_output *o) {
    if (!o) return;
    if (o->thread_started) {
        atomic_store(&o->quit, 1);
        atomic_fetch_add(&o->data_counter, 1);
        sm_futex_wake(&o->data_counter);
        pthread_join(o->thread, NULL);
    }
    sm_backend_close(o->dev);
    sm_ring_destroy(o->ring);
    free(o->fbuf);
    free(o->obuf);
    free(o->hist);
    free(o->hist_gain);
    free(o);
}

sm_ring *sm_output_ring(sm_output *o) { return o->ring; }
sm_output_info sm_output_get_info(const sm_output *o) { return o->info; }

sm_output_stats sm_output_get_stats(const sm_output *o) {
    sm_output *m = (sm_output *)o;
    sm_output_stats s = {
        .frames_written = atomic_load(&m->st_frames_written),
        .silence_frames = atomic_load(&m->st_silence_frames),
        .silence_events = atomic_load(&m->st_silence_events),
        .xruns = m->dev ? atomic_load(&m->dev->xruns) : 0,
        .suspends = m->dev ? atomic_load(&m->dev->suspends) : 0,
        .rewinds = atomic_load(&m->st_rewinds),
        .realtime = atomic_load(&m->st_realtime),
        .rt_errno = atomic_load(&m->st_rt_errno),
        .paced = atomic_load(&m->st_paced),
        .failed = atomic_load(&m->st_failed),
    };
    /* The last pause's figures, read under their seqlock (a few tries; else none). */
    for (int tries = 0; tries < 8; tries++) {
        uint32_t q = atomic_load_explicit(&m->st_pauses, memory_order_acquire);
        if (q & 1) continue;
        uint32_t ahead = atomic_load_explicit(&m->st_pause_ahead, memory_order_relaxed);
        uint64_t posted = atomic_load_explicit(&m->st_pause_posted_ns, memory_order_relaxed);
        uint64_t written = atomic_load_explicit(&m->st_pause_written_ns, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&m->st_pauses, memory_order_relaxed) != q) continue;
        s.pauses = q / 2;
        s.pause_ahead_frames = ahead;
        s.pause_posted_ns = posted;
        s.pause_written_ns = written;
        break;
    }
    return s;
}

void sm_output_last_error(const sm_output *o, sm_error *e) {
    if (atomic_load_explicit(&((sm_output *)o)->st_failed, memory_order_acquire)) *e = o->last_error;
    else memset(e, 0, sizeof *e);
}

int sm_output_failed(const sm_output *o) {
    return atomic_load_explicit(&((sm_output *)o)->st_failed, memory_order_acquire);
}

uint64_t sm_output_played_index(const sm_output *o) {
    return sm_output_played_index_at(o, sm_monotonic_ns());
}

uint64_t sm_output_played_index_at(const sm_output *o, uint64_t at) {
    sm_output *m = (sm_output *)o;
    uint64_t idx, limit, ns;
    uint32_t q;
    do {
        q = atomic_load_explicit(&m->clock_seq, memory_order_acquire);
        idx = atomic_load_explicit(&m->played_index, memory_order_relaxed);
        limit = atomic_load_explicit(&m->clock_limit, memory_order_relaxed);
        ns = atomic_load_explicit(&m->clock_ns, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
    } while ((q & 1) || q != atomic_load_explicit(&m->clock_seq, memory_order_relaxed));
    if (ns == 0) return idx;
    /* 10 s at most either way (more is no moment ago, and frames * ns must not overflow).
     * Carried back, the index goes back in real time: silence the device played in the
     * meantime (an underrun's) is not known here, and the index found is early by it. */
    const uint64_t most = 10000000000ull;
    if (at < ns) {
        uint64_t back = (ns - at < most ? ns - at : most) * m->info.rate / 1000000000ull;
        return back < idx ? idx - back : 0;
    }
    uint64_t ahead = (at - ns < most ? at - ns : most) * m->info.rate / 1000000000ull;
    return idx + ahead < limit ? idx + ahead : limit;
}

void sm_output_align(sm_output *o, uint64_t ns) {
    atomic_store_explicit(&o->align_late_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&o->align_skipped_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&o->align_ns, ns, memory_order_release);
}

void sm_output_standby_holds_pause(sm_output *o) {
    atomic_store_explicit(&o->standby_holds_pause, 1, memory_order_release);
}

uint64_t sm_output_align_late(const sm_output *o) {
    return atomic_load_explicit(&((sm_output *)o)->align_late_ns, memory_order_acquire);
}

uint64_t sm_output_align_skipped(const sm_output *o) {
    return atomic_load_explicit(&((sm_output *)o)->align_skipped_ns, memory_order_acquire);
}

uint64_t sm_output_stop_index(const sm_output *o) {
    return atomic_load_explicit(&((sm_output *)o)->stop_index, memory_order_acquire);
}

uint32_t sm_output_post(sm_output *o, int request) {
    /* A drain is for what the producer (the poster) has written so far. */
    if (request == SM_REQ_DRAIN)
        atomic_store_explicit(&o->drain_at, sm_ring_write_index(o->ring), memory_order_relaxed);
    atomic_store_explicit(&o->req_ns, sm_monotonic_ns(), memory_order_relaxed);
    atomic_store_explicit(&o->req_type, request, memory_order_release);
    uint32_t seq = atomic_fetch_add_explicit(&o->req_seq, 1, memory_order_acq_rel) + 1;
    atomic_fetch_add_explicit(&o->data_counter, 1, memory_order_seq_cst);
    sm_futex_wake(&o->data_counter);
    return seq;
}

static int64_t now_ms(void) {
    return (int64_t)(sm_monotonic_ns() / 1000000ull);
}

uint32_t sm_output_post_fade(sm_output *o, uint32_t frames) {
    atomic_store_explicit(&o->req_arg, frames, memory_order_release);
    return sm_output_post(o, SM_REQ_FADE);
}

int sm_output_wait(sm_output *o, uint32_t seq, int timeout_ms) {
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        uint32_t d = atomic_load_explicit(&o->done_seq, memory_order_acquire);
        if ((int32_t)(d - seq) >= 0) return 1;
        if (!o->thread_started) return 0;
        int64_t left = deadline - now_ms();
        if (left <= 0) return 0;
        sm_futex_wait(&o->done_seq, d, (int)(left < 100 ? left : 100));
    }
}

void sm_output_notify(sm_output *o) {
    atomic_fetch_add_explicit(&o->data_counter, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&o->consumer_waiting, memory_order_seq_cst)) sm_futex_wake(&o->data_counter);
}

void sm_output_wake_producer(sm_output *o) {
    atomic_store_explicit(&o->producer_poked, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&o->space_counter, 1, memory_order_seq_cst);
    sm_futex_wake(&o->space_counter);
}

uint32_t sm_output_wait_writable(sm_output *o, uint32_t frames, int timeout_ms) {
    uint32_t w = sm_ring_writable(o->ring);
    if (w >= frames || timeout_ms == 0) return w;
    int64_t deadline = now_ms() + timeout_ms;
    atomic_store_explicit(&o->producer_want, frames, memory_order_relaxed);
    for (;;) {
        uint32_t c = atomic_load_explicit(&o->space_counter, memory_order_seq_cst);
        atomic_store_explicit(&o->producer_waiting, 1, memory_order_seq_cst);
        w = sm_ring_writable(o->ring);
        if (w >= frames) break;
        int64_t left = deadline - now_ms();
        if (left <= 0) break;
        sm_futex_wait(&o->space_counter, c, (int)left);
        /* A wake without enough space is either the consumer (wait on) or a command
         * (sm_output_wake_producer sets the counter without freeing space: return). */
        if (atomic_exchange_explicit(&o->producer_poked, 0, memory_order_seq_cst)) break;
    }
    atomic_store_explicit(&o->producer_waiting, 0, memory_order_relaxed);
    return sm_ring_writable(o->ring);
}

/* ------------------------------------------------------------ the producer's priority */

/* The output thread runs SCHED_FIFO, but what it plays after a seek, a resume or a start
 * comes from the render thread, which had the priority of any process: beside six busy
 * processes at nice -5 on two cores every seek on PulseAudio ran the device dry (two
 * periods of silence counted; none at nice -10). Linux keeps a nice value per thread. */
void sm_output_raise_producer(const sm_output *o) {
    if (o && o->want_realtime) sm_raise_thread_nice(-10);
}
