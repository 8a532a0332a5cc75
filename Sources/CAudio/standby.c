/*
 * The standby (SM_REQ_STANDBY, the daemon's output-standby): between sessions the device
 * stays open and running on silence, so the next session starts into a running stream
 * (HDMI receivers drop the first second of a new stream; many DACs pop when the device
 * opens or closes). Part of the output thread (output.c calls these from its loop and its
 * request handling; these call play.c, never output.c): the same rules, no allocation, no
 * lock, no call into Swift.
 */
#define _GNU_SOURCE
#include "caudio.h"
#include "play.h"
#include "standby.h"

#include <errno.h>
#include <string.h>

/* The session is over; the device stays open and running on silence. */
void sm_standby_enter(sm_output *o) {
    /* A paused session's device kept running (its resume is then met to the frame); any
     * other standby is between sessions (one that ended with a fade rests paused too). */
    o->standby_paused = atomic_exchange_explicit(&o->standby_holds_pause, 0, memory_order_acq_rel)
                        && o->state == OUT_PAUSED;
    if (out_running(o->state) && sm_out_ramp_out(o, 0) < 0) return;
    sm_out_flush_ring(o);
    atomic_store_explicit(&o->stop_index, o->next_ring, memory_order_release);
    sm_dev_state st = dev_state(o);
    if (st == SM_DEV_PAUSED) {
        if (dev_pause(o, 0) < 0) { dev_drop(o); dev_prepare(o); }
    } else if (st != SM_DEV_RUNNING && st != SM_DEV_PREPARED) {
        dev_prepare(o);
    }
    o->gain = 1.0f;
    o->gain_target = 1.0f;
    o->gain_step = 1.0f / (float)o->ramp_frames;
    o->refill_grace = 0;
    o->state = OUT_STANDBY_FIRST;
    sm_out_publish_clock(o, o->next_ring, o->next_ring, 0);
}

/* What the device has queued (in *delay); 0 when it is not playing or preparing. (A
 * PulseAudio stream may play while its state still says PREPARED: its delay tells.) */
static int queued(sm_output *o, long *delay) {
    sm_dev_state st = dev_state(o);
    return (st == SM_DEV_RUNNING || st == SM_DEV_PREPARED) && dev_delay(o, delay) == 0;
}

/* What the standby may queue now: what fits, less the room the output leaves free (the
 * queue a session keeps; a session starts behind this silence where it cannot be taken
 * back: a dmix's third 125-ms period, filled, made the start 125 ms later in the rig). */
static long room(sm_output *o) {
    long avail = dev_avail(o);
    if (avail > (long)o->info.buffer_frames) avail = (long)o->info.buffer_frames;
    return avail - (long)o->dev->info.headroom_frames;
}

/* One turn of the standby: tops the device up with silence whenever a period is free,
 * then sleeps for a period (20 ms on ALSA's default buffer, 125 ms on PulseAudio's). A
 * device that does not pace (null, file) has nothing to keep. */
void sm_standby_keep(sm_output *o) {
    if (!atomic_load_explicit(&o->st_paced, memory_order_relaxed)) {
        /* Not known to play in real time (opened for the standby, or a device that does
         * not pace): silence until it starts (a sound server starts a stream once enough
         * is queued), which shows whether it plays in real time (a sound card, a server)
         * or not (null, file: nothing to keep then). */
        if (o->state == OUT_STANDBY_FIRST || dev_state(o) == SM_DEV_PREPARED) {
            if (o->state == OUT_STANDBY_FIRST) o->standby_looks = 0;
            o->state = OUT_STANDBY;
            long avail = room(o);   /* what fits now: a write never blocks here */
            if (avail > 0 && sm_out_play_silence(o, (uint32_t)avail, 0) < 0) return;
        }
        /* A sound server may take a moment to start the stream and report its delay: look
         * again every 50 ms for a second, then once a second (woken at once by frames, a
         * request or the close). */
        long delay = 0;
        if (queued(o, &delay) && delay > 0) {
            atomic_store_explicit(&o->st_paced, 1, memory_order_relaxed);
            return;
        }
        sm_out_wait_for_data(o, sm_out_start_frames(o), o->standby_looks++ < 20 ? 50 : 1000);
        return;
    }
    sm_dev_state st = dev_state(o);
    if (st == SM_DEV_STOPPED || st == SM_DEV_XRUN || st == SM_DEV_SUSPENDED) {
        int r = st == SM_DEV_STOPPED ? dev_prepare(o) : dev_restart(o);
        if (r < 0 && dev_prepare(o) < 0) {
            sm_out_fail(o, -EIO, "kept open between sessions");
            return;
        }
    }
    /* Topped up whenever a period is free, as the session's own loop writes (a sound
     * server asks for a period at a time, and its sink may pull ahead in bursts; the
     * delay is no measure of what its stream still holds), then asleep for a period. */
    long avail = room(o);
    if (avail >= (long)o->info.period_frames && sm_out_play_silence(o, (uint32_t)avail, 0) < 0) return;
    int ms = (int)((uint64_t)o->info.period_frames * 1000 / o->info.rate);
    sm_out_wait_for_data(o, sm_out_start_frames(o), ms < 1 ? 1 : ms);
}

/* Frames came: the stream plays them. The silence queued is taken back (where the device
 * allows) down to a few ms, so the session is heard at once (an aligned start: only what
 * lies past its instant); none of the last session's audio is touched. */
void sm_standby_leave(sm_output *o) {
    o->state = OUT_PLAYING;
    if (o->standby_paused) {
        /* A paused session goes on: from silence, with a fade-in (a gong rang on). */
        o->standby_paused = 0;
        o->gain = 0.0f;
        o->gain_target = 1.0f;
    }
    o->refill_grace = o->info.rate / 5;
    /* An aligned start takes back only what lies past its instant (output.c). */
    if (!atomic_load_explicit(&o->align_ns, memory_order_acquire)) sm_out_take_back_silence(o);
}
