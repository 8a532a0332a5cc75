/*
 * The Snapcast backend ("snapcast", "snapcast:/path/to/fifo"): the engine's stream into the
 * named pipe that snapserver's pipe source reads (sampleformat 44100:16:2 or the engine's
 * rate), so that snapclients in several rooms play it in sync. snapserver reads the pipe at
 * its own real-time pace, a chunk (20 ms) at a time: the pipe is this device's buffer
 * (shrunk to about 70 ms usable, so that a pause is heard soon), its fill is the queue, and its
 * free space what may be written. Every call returns at once (O_NONBLOCK). The pipe is
 * opened for reading too: the open never waits for (or fails without) a reader, a write
 * never meets EPIPE, a drop takes back what the server has not read yet (read out of the
 * pipe), and a server that stops reading (stopped, restarted) does not hold the session: once
 * the pipe has stayed full for 250 ms the backend reads it out itself at the stream's rate,
 * as a card with no speaker would play (counted once as an underrun), until the server
 * reads again; pause, seek and stop go on as on any device. What is queued cannot be taken back
 * in part (no rewind); a pause feeds the pipe silence (the engine keeps the stream running
 * while paused on this device: snapserver would otherwise see its source dry out).
 *
 * What is refused: a path that is not a FIFO (a regular file is never written), one whose
 * last component is a symbolic link (O_NOFOLLOW), a FIFO others may write to that is not
 * this user's (someone else's audio could be mixed in, or ours read where it should not
 * be). The path itself has passed the device-name parser (DeviceName.swift): absolute, a
 * few safe characters, no "..".
 */
#define _GNU_SOURCE
#include "backend.h"
#include "diag.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FIFO_DEFAULT_PATH "/tmp/snapfifo"
/* The pipe's size asked for: 16 KiB is 93 ms at 44.1 kHz, 16-bit stereo (a page of it is
 * left free: sm_fifo_open). */
#define FIFO_PIPE_BYTES 16384
#define FRAME_BYTES 4

/* How long a full pipe waits for its reader before the backend plays it into the void. */
#define FIFO_LOST_NS 250000000ull

typedef struct sm_fifo {
    sm_backend base;
    int fd;
    long pipe_frames;
    uint32_t rate;
    sm_dev_state state;
    long expect;          /* what the pipe held after this backend's last look, write or read */
    uint64_t full_since;  /* when the pipe was first seen full with nobody reading (0: not) */
    int lost_reader;      /* the server does not read: the backend reads at the stream's rate */
    uint64_t drained_at;  /* the last of those reads */
} sm_fifo;

static long queued_frames(sm_fifo *f) {
    int bytes = 0;
    if (ioctl(f->fd, FIONREAD, &bytes) < 0) return -errno;
    return bytes / FRAME_BYTES;
}

/* Takes `frames` out of the pipe (what the server has not read). */
static void read_out(sm_fifo *f, long frames) {
    char sink[4096];
    size_t left = (size_t)frames * FRAME_BYTES;
    while (left > 0) {
        ssize_t r = read(f->fd, sink, left < sizeof sink ? left : sizeof sink);
        if (r <= 0) break;
        left -= (size_t)r;
    }
}

/* Sees whether the server reads; while it does not, plays the pipe into the void at the
 * stream's rate. */
static void keep_pace(sm_fifo *f) {
    long q = queued_frames(f);
    if (q < 0) return;
    uint64_t now = sm_monotonic_ns();
    if (q < f->expect) {            /* someone else read since: the server is there */
        f->lost_reader = 0;
        f->full_since = 0;
    }
    if (!f->lost_reader && f->state == SM_DEV_RUNNING && q + (long)f->base.info.period_frames >= f->pipe_frames) {
        if (!f->full_since) {
            f->full_since = now;
        } else if (now - f->full_since >= FIFO_LOST_NS) {
            f->lost_reader = 1;
            f->drained_at = now - FIFO_LOST_NS;
            atomic_fetch_add(&f->base.xruns, 1);
        }
    } else if (!f->lost_reader) {
        f->full_since = 0;
    }
    if (f->lost_reader) {
        long n = (long)((now - f->drained_at) / 1000 * f->rate / 1000000);
        if (n > 0) {
            read_out(f, n < q ? n : q);
            f->drained_at += (uint64_t)n * 1000000000ull / f->rate;
            q = queued_frames(f);
            if (q < 0) q = 0;
        }
    }
    f->expect = q;
}

static sm_dev_state fifo_state(sm_backend *b) {
    sm_fifo *f = (sm_fifo *)b;
    keep_pace(f);
    return f->state;
}

static long fifo_avail(sm_backend *b) {
    sm_fifo *f = (sm_fifo *)b;
    keep_pace(f);
    long q = queued_frames(f);
    if (q < 0) return q;
    return q >= f->pipe_frames ? 0 : f->pipe_frames - q;
}

/* Writes what fits: the output writes only what avail said fits. A server that read less
 * meanwhile is waited for (poll, 5-ms steps) at most 20 ms; what is left then is dropped
 * and counted as an underrun (the output thread is never held longer). */
static long fifo_write(sm_backend *b, const void *frames, uint32_t n, uint32_t *lost, int *restarted) {
    sm_fifo *f = (sm_fifo *)b;
    (void)lost;
    if (restarted) *restarted = 0;
    const char *p = frames;
    size_t left = (size_t)n * FRAME_BYTES;
    int waited = 0;
    while (left > 0) {
        ssize_t w = write(f->fd, p, left);
        if (w > 0) {
            p += w;
            left -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN) {
            int err = errno;
            snprintf(b->error, sizeof b->error, "the Snapcast pipe failed: %s", strerror(err));
            f->state = SM_DEV_LOST;
            return -err;
        }
        /* A partial frame is never left behind: its rest is waited for a little longer. */
        if (waited >= 20 && left % FRAME_BYTES == 0) {
            atomic_fetch_add(&b->xruns, 1);
            break;
        }
        if (waited >= 200) break;
        struct pollfd pfd = { .fd = f->fd, .events = POLLOUT };
        poll(&pfd, 1, 5);
        waited += 5;
    }
    f->state = SM_DEV_RUNNING;
    f->expect += (long)(((size_t)n * FRAME_BYTES - left) / FRAME_BYTES);
    return n;   /* what was dropped is counted above */
}

static int fifo_delay(sm_backend *b, long *frames, long *rewindable) {
    sm_fifo *f = (sm_fifo *)b;
    keep_pace(f);
    long q = queued_frames(f);
    if (q < 0) return (int)q;
    *frames = f->state == SM_DEV_RUNNING ? q : 0;
    if (rewindable) *rewindable = 0;
    return 0;
}

/* What the server has not read yet is taken out of the pipe. */
static int fifo_drop(sm_backend *b) {
    sm_fifo *f = (sm_fifo *)b;
    long q = queued_frames(f);
    if (q > 0) read_out(f, q);
    f->expect = 0;
    f->full_since = 0;
    f->state = SM_DEV_STOPPED;
    return 0;
}

static int fifo_prepare(sm_backend *b) {
    ((sm_fifo *)b)->state = SM_DEV_PREPARED;
    return 0;
}

/* Until the server has read everything (at most the pipe's length and a second). */
static int fifo_drain(sm_backend *b) {
    sm_fifo *f = (sm_fifo *)b;
    for (int i = 0; i < 250; i++) {
        keep_pace(f);
        long q = queued_frames(f);
        if (q <= 0) break;
        struct timespec ts = { 0, 5000000L };
        nanosleep(&ts, NULL);
    }
    f->state = SM_DEV_STOPPED;
    return 0;
}

static void fifo_close(sm_backend *b) {
    sm_fifo *f = (sm_fifo *)b;
    if (f->fd >= 0) close(f->fd);
    free(f);
}

static const sm_backend_ops fifo_ops = {
    .state = fifo_state, .avail = fifo_avail, .write = fifo_write, .delay = fifo_delay,
    .drop = fifo_drop, .prepare = fifo_prepare, .close = fifo_close, .drain = fifo_drain,
};

sm_backend *sm_fifo_open(const sm_backend_config *c, sm_error *e) {
    const char *path = (c->name && *c->name) ? c->name : FIFO_DEFAULT_PATH;
    int fd = open(path, O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ELOOP)
            sm_set_error(e, SM_ERR_NO_DEVICE, 0, "%s is a symbolic link, not snapserver's pipe", path);
        else if (err == ENOENT)
            sm_set_error(e, SM_ERR_NO_DEVICE, 0, "%s does not exist: start snapserver with its pipe source there "
                         "(source = pipe://%s?name=default&sampleformat=44100:16:2)", path, path);
        else
            sm_set_error(e, SM_ERR_NO_DEVICE, 0, "cannot open %s: %s", path, strerror(err));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
        close(fd);
        sm_set_error(e, SM_ERR_NO_DEVICE, 0, "%s is not a named pipe (snapserver's pipe source makes one)", path);
        return NULL;
    }
    if ((st.st_mode & S_IWOTH) && st.st_uid != geteuid()) {
        close(fd);
        sm_set_error(e, SM_ERR_NO_DEVICE, 0, "%s may be written by anyone and is not yours: refused", path);
        return NULL;
    }
    sm_fifo *f = calloc(1, sizeof *f);
    if (!f) {
        close(fd);
        sm_set_error(e, SM_ERR_MEMORY, 0, "out of memory");
        return NULL;
    }
    f->fd = fd;
    int size = fcntl(fd, F_SETPIPE_SZ, FIFO_PIPE_BYTES);
    if (size < 0) size = fcntl(fd, F_GETPIPE_SZ);
    if (size < 8192) size = 65536;    /* not known: the kernel's default */
    /* A pipe holds its data in pages and frees one only once it is read whole: with a
     * page begun at each end, a page less than its size fits (the rest, counted as free by
     * bytes, made a write wait and drop: an underrun at one pause in six). */
    f->pipe_frames = (size - 4096) / FRAME_BYTES;
    f->state = SM_DEV_PREPARED;
    f->base.ops = &fifo_ops;
    f->base.name = "snapcast";
    f->base.label = "Snapcast";
    uint32_t rate = c->rate ? c->rate : 44100;
    f->rate = rate;
    sm_backend_info *info = &f->base.info;
    info->rate = rate;
    info->buffer_frames = (uint32_t)f->pipe_frames;
    /* snapserver reads 20 ms at a time. */
    info->period_frames = rate / 50;
    if (info->period_frames * 2 > info->buffer_frames) info->period_frames = info->buffer_frames / 4;
    info->format = SM_FORMAT_S16;
    info->sound_server = 1;
    return &f->base;
}
