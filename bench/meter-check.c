/*
 * meter-check: accuracy and cost of sm_meter (Sources/CLoudness/meter.c).
 *
 *   gcc -O2 -I../Sources/CLoudness/include meter-check.c ../Sources/CLoudness/meter.c -lmpg123 -lebur128 -lm -o meter-check
 *
 *   meter-check test              synthetic signals against libebur128 and a full 4x reference
 *   meter-check check FILE...     MP3s decoded by libmpg123, the same comparisons
 *   meter-check time FILE [RUNS]  CPU seconds, best of RUNS (3): mpg123 -q -t, decode only,
 *                                 decode + sm_meter, decode + libebur128 MODE_I, and the
 *                                 meter alone over PCM already in memory
 *
 * Loudness is compared with libebur128 (EBUR128_MODE_I | EBUR128_MODE_TRUE_PEAK) and must
 * agree within 0.05 LU. The true peak must equal (1e-6 relative) a reference that
 * oversamples every interval with the same BS.1770-4 filter in double precision.
 * libebur128's true peak is shown next to it, and held to 0.1 dB only on the synthetic
 * signals where the two methods measure the same thing: libebur128 interpolates with
 * its own 49-tap Hann-windowed sinc on a grid that includes the samples, 2x from 96 kHz
 * and not at all from 192 kHz; the BS.1770 filter's grid lies 1/8 sample off the
 * samples (a crest between two samples can be missed by up to 1/8 sample) and its
 * middle phases ripple by +-0.22 dB above about 2 kHz (at 48 kHz). So on tones, and on
 * programme with strong high-frequency peaks, the two differ by a few tenths of a dB,
 * each right for its filter.
 */
#define _GNU_SOURCE
#include <ebur128.h>
#include <math.h>
#include <mpg123.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "../Sources/CLoudness/include/cloudness.h"

extern char **environ;

enum { CHUNK = 16384, MAXCH = 8 };

static int failures;

static double db(double x) { return 20.0 * log10(x); }

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------ full 4x reference */

/* Every interval between two real samples, all four phases, in double precision;
 * zeros before the first sample and after the last. Together with the samples. */
static const double ref_coef[4][12] = {
    { 0.0017089843750,  0.0109863281250, -0.0196533203125,  0.0332031250000,
     -0.0594482421875,  0.1373291015625,  0.9721679687500, -0.1022949218750,
      0.0476074218750, -0.0266113281250,  0.0148925781250, -0.0083007812500},
    {-0.0291748046875,  0.0292968750000, -0.0517578125000,  0.0891113281250,
     -0.1665039062500,  0.4650878906250,  0.7797851562500, -0.2003173828125,
      0.1015625000000, -0.0582275390625,  0.0330810546875, -0.0189208984375},
    {-0.0189208984375,  0.0330810546875, -0.0582275390625,  0.1015625000000,
     -0.2003173828125,  0.7797851562500,  0.4650878906250, -0.1665039062500,
      0.0891113281250, -0.0517578125000,  0.0292968750000, -0.0291748046875},
    {-0.0083007812500,  0.0148925781250, -0.0266113281250,  0.0476074218750,
     -0.1022949218750,  0.9721679687500,  0.1373291015625, -0.0594482421875,
      0.0332031250000, -0.0196533203125,  0.0109863281250,  0.0017089843750},
};

typedef struct {
    int channels;
    long long n;               /* samples per channel fed */
    double hist[MAXCH][24];    /* each sample stored twice, 12 apart: a window is contiguous */
    int pos;
    double peak;
} tpref;

static void tpref_push(tpref *r, const double *frame) {
    int pos = r->pos;
    for (int c = 0; c < r->channels; c++) {
        double *h = r->hist[c];
        h[pos] = h[pos + 12] = frame[c];
        if (fabs(frame[c]) > r->peak) r->peak = fabs(frame[c]);
        /* The window h[pos+1 .. pos+12] is x[s-11 .. s]; interval s-6 lies between its
         * taps 6 and 5. */
        long long k = r->n - 6;
        if (k < 0) continue;
        for (int p = 0; p < 4; p++) {
            double y = 0;
            for (int t = 0; t < 12; t++) y += ref_coef[p][t] * h[pos + 12 - t];
            if (fabs(y) > r->peak) r->peak = fabs(y);
        }
    }
    r->pos = (pos + 1) % 12;
    r->n++;
}

static void tpref_add(tpref *r, const float *x, size_t frames) {
    double f[MAXCH];
    for (size_t i = 0; i < frames; i++) {
        for (int c = 0; c < r->channels; c++) f[c] = x[i * (size_t)r->channels + (size_t)c];
        tpref_push(r, f);
    }
}

/* The last real sample is x[N-1]; the last interval (N-2, N-1) is evaluated once
 * x[N+4] (a zero) is in the window. */
static double tpref_finish(tpref *r) {
    double zero[MAXCH] = {0};
    long long last = r->n - 2;
    while (r->n - 6 <= last) tpref_push(r, zero);
    return r->peak;
}

/* ------------------------------------------------------------ the three meters */

typedef struct {
    int channels, rate;
    sm_meter *sm;
    ebur128_state *eb;
    tpref ref;
} meters;

static void meters_init(meters *ms, int channels, int rate) {
    memset(ms, 0, sizeof *ms);
    ms->channels = channels;
    ms->rate = rate;
    ms->sm = sm_meter_new(channels, rate);
    ms->eb = ebur128_init((unsigned)channels, (unsigned long)rate, EBUR128_MODE_I | EBUR128_MODE_TRUE_PEAK);
    ms->ref.channels = channels;
    if (!ms->sm || !ms->eb) {
        fprintf(stderr, "cannot create meters for %d ch %d Hz\n", channels, rate);
        exit(2);
    }
}

static void meters_add(meters *ms, const float *x, size_t frames) {
    sm_meter_add(ms->sm, x, frames);
    ebur128_add_frames_float(ms->eb, x, frames);
    tpref_add(&ms->ref, x, frames);
}

/* Prints one line and checks it. eb_differs: libebur128's true peak is not held to
 * 0.1 dB (see the top of the file), only shown. */
static void meters_report(meters *ms, const char *name, int eb_differs) {
    double ours_l = 0, eb_l = 0;
    int ours_rc = sm_meter_loudness(ms->sm, &ours_l);
    ebur128_loudness_global(ms->eb, &eb_l);
    double ours_tp = sm_meter_true_peak(ms->sm);
    double ref_tp = tpref_finish(&ms->ref);
    double eb_tp = 0;
    for (int c = 0; c < ms->channels; c++) {
        double v = 0;
        ebur128_true_peak(ms->eb, (unsigned)c, &v);
        if (v > eb_tp) eb_tp = v;
    }

    int ok = 1;
    char lbuf[96];
    if (ours_rc == 0 && isfinite(eb_l)) {
        double d = ours_l - eb_l;
        snprintf(lbuf, sizeof lbuf, "%8.3f %8.3f %+9.2e", ours_l, eb_l, d);
        if (fabs(d) > 0.05) ok = 0;
    } else {
        snprintf(lbuf, sizeof lbuf, "%8s %8s %9s", ours_rc == 0 ? "?" : "none", isfinite(eb_l) ? "?" : "-inf", "");
        if ((ours_rc == 0) != isfinite(eb_l)) ok = 0;
    }
    double rel = ref_tp > 0 ? fabs(ours_tp - ref_tp) / ref_tp : fabs(ours_tp);
    if (rel > 1e-6) ok = 0;
    double deb = (ours_tp > 0 && eb_tp > 0) ? db(ours_tp) - db(eb_tp) : 0;
    if (!eb_differs && fabs(deb) > 0.1) ok = 0;
    printf("%-34s %s | %8.3f %8.3f %8.1e | %8.3f %+6.3f%s | %s\n", name, lbuf,
           ours_tp > 0 ? db(ours_tp) : -INFINITY, ref_tp > 0 ? db(ref_tp) : -INFINITY, rel,
           eb_tp > 0 ? db(eb_tp) : -INFINITY, deb, eb_differs ? "*" : " ", ok ? "ok" : "FAIL");
    if (!ok) failures++;
    sm_meter_free(ms->sm);
    ebur128_destroy(&ms->eb);
}

static void print_header(void) {
    printf("%-34s %8s %8s %9s | %8s %8s %8s | %8s %6s\n", "signal", "LUFS", "ebur128", "diff",
           "dBTP", "ref 4x", "rel.err", "ebur128", "diff");
}

/* ------------------------------------------------------------ test signals */

typedef struct { uint64_t s; } rng;
static double urand(rng *r) {   /* xorshift64*, uniform in [0, 1) */
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return (double)((r->s * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}
static double grand(rng *r) {   /* roughly Gaussian, unit variance */
    double s = 0;
    for (int i = 0; i < 12; i++) s += urand(r);
    return s - 6.0;
}

typedef struct {
    float *x;
    size_t frames;
    int channels, rate;
} testsig;

static testsig sig_new(int channels, int rate, double seconds) {
    testsig s = {0};
    s.channels = channels;
    s.rate = rate;
    s.frames = (size_t)(seconds * rate + 0.5);
    s.x = calloc(s.frames * (size_t)channels + 1, sizeof(float));
    return s;
}

/* Raised-cosine fades, so a tone starts and stops without a click. */
static void sig_fade(testsig *s, double seconds) {
    size_t n = (size_t)(seconds * s->rate);
    if (2 * n > s->frames) n = s->frames / 2;
    for (size_t i = 0; i < n; i++) {
        double g = 0.5 - 0.5 * cos(M_PI * (double)i / (double)n);
        for (int c = 0; c < s->channels; c++) {
            s->x[i * (size_t)s->channels + (size_t)c] *= (float)g;
            s->x[(s->frames - 1 - i) * (size_t)s->channels + (size_t)c] *= (float)g;
        }
    }
}

static void sig_sine(testsig *s, double freq, double amp, double phase) {
    for (size_t i = 0; i < s->frames; i++)
        for (int c = 0; c < s->channels; c++)
            s->x[i * (size_t)s->channels + (size_t)c] =
                (float)(amp * sin(2 * M_PI * freq * (double)i / s->rate + phase));
}

/* Speech-like programme: noise through a gentle low-pass (energy falling above a few
 * hundred Hz) under a syllabic envelope (3-5 Hz) with pauses, level in dBFS rms. */
static void sig_programme(testsig *s, double level_db, uint64_t seed, size_t from, size_t to) {
    rng r = {seed};
    double lp[MAXCH] = {0}, lp2[MAXCH] = {0};
    double env = 0, target = 1, amp = pow(10, level_db / 20) * 3.0;
    size_t hold = 0;
    double a = exp(-2 * M_PI * 800.0 / s->rate), b = exp(-2 * M_PI * 150.0 / s->rate);
    double ea = exp(-1.0 / (0.02 * s->rate));
    for (size_t i = from; i < to && i < s->frames; i++) {
        if (hold == 0) {
            hold = (size_t)(s->rate * (0.12 + 0.15 * urand(&r)));
            target = urand(&r) < 0.15 ? 0.0 : 0.3 + 0.7 * urand(&r);
        }
        hold--;
        env = ea * env + (1 - ea) * target;
        for (int c = 0; c < s->channels; c++) {
            double w = grand(&r);
            lp[c] = a * lp[c] + (1 - a) * w;
            lp2[c] = b * lp2[c] + (1 - b) * w;
            double v = amp * env * (0.6 * lp[c] + 2.0 * lp2[c]);
            s->x[i * (size_t)s->channels + (size_t)c] = (float)v;
        }
    }
}

static void sig_noise(testsig *s, double sigma, uint64_t seed) {
    rng r = {seed};
    for (size_t i = 0; i < s->frames * (size_t)s->channels; i++) s->x[i] = (float)(sigma * grand(&r));
}

/* Feeds in irregular pieces, to show the result does not depend on how the caller
 * cuts the stream. */
static void run_signal(const char *name, testsig *s, int eb_differs, int irregular) {
    meters ms;
    meters_init(&ms, s->channels, s->rate);
    rng r = {12345};
    size_t done = 0;
    while (done < s->frames) {
        size_t n = irregular ? 1 + (size_t)(urand(&r) * 3000) : CHUNK;
        if (n > s->frames - done) n = s->frames - done;
        meters_add(&ms, s->x + done * (size_t)s->channels, n);
        done += n;
    }
    meters_report(&ms, name, eb_differs);
    free(s->x);
}

static void run_tests(void) {
    print_header();
    testsig s;

    s = sig_new(2, 48000, 20);
    sig_sine(&s, 997, 0.1, 0);
    sig_fade(&s, 0.01);
    run_signal("sine 997 Hz -20 dBFS, 2ch 48k", &s, 0, 0);

    s = sig_new(2, 48000, 20);
    sig_sine(&s, 997, 0.1, 0);
    sig_fade(&s, 0.01);
    run_signal("  same, fed in irregular pieces", &s, 0, 1);

    s = sig_new(2, 44100, 10);
    run_signal("digital silence, 2ch 44.1k", &s, 0, 0);

    s = sig_new(2, 44100, 0.3);
    sig_sine(&s, 1000, 0.5, 0);
    sig_fade(&s, 0.005);
    run_signal("300 ms sine (no block), 2ch 44.1k", &s, 0, 0);

    s = sig_new(2, 44100, 0.43);
    sig_sine(&s, 1000, 0.5, 0);
    sig_fade(&s, 0.005);
    run_signal("430 ms sine (one block), 2ch 44.1k", &s, 0, 0);

    s = sig_new(1, 22050, 30);
    sig_programme(&s, -20, 1, 0, s.frames);
    run_signal("speech-like, 1ch 22.05k", &s, 0, 0);

    s = sig_new(1, 8000, 30);
    sig_programme(&s, -18, 2, 0, s.frames);
    run_signal("speech-like, 1ch 8k", &s, 0, 0);

    s = sig_new(2, 44100, 60);
    sig_programme(&s, -16, 3, 0, s.frames);
    run_signal("speech-like, 2ch 44.1k", &s, 0, 0);

    s = sig_new(2, 44100, 60);
    sig_programme(&s, -16, 3, 0, s.frames);
    run_signal("  same, fed in irregular pieces", &s, 0, 1);

    /* Gates: 20 s at -20, 20 s at -34 (below the relative gate), 10 s at -75 dBFS
     * (below the absolute gate), 10 s of digital silence, 10 s at -20 again. */
    s = sig_new(2, 44100, 70);
    sig_programme(&s, -20, 4, 0, 20 * 44100);
    sig_programme(&s, -34, 5, 20 * 44100, 40 * 44100);
    sig_programme(&s, -75, 6, 40 * 44100, 50 * 44100);
    sig_programme(&s, -20, 7, 60 * 44100, 70 * 44100);
    run_signal("gated programme, 2ch 44.1k", &s, 0, 0);

    /* Bursts of noise between stretches of digital silence: the filters' decay into
     * the denormal range, every two seconds. */
    s = sig_new(2, 44100, 60);
    for (int k = 0; k < 30; k++) sig_programme(&s, -18, 8 + (uint64_t)k, (size_t)k * 88200, (size_t)k * 88200 + 8820);
    run_signal("bursts in digital silence, 2ch", &s, 0, 0);

    s = sig_new(2, 44100, 30);
    sig_noise(&s, 0.2, 9);
    run_signal("white noise sigma 0.2, 2ch 44.1k", &s, 1, 0);

    /* Tones above a few kHz: the standard's filter ripples by up to +-0.22 dB in its
     * middle phases (its response at 5 kHz / 44.1 kHz is +0.115 dB, at 12 kHz / 48 kHz
     * +0.221 dB), libebur128's by far less; and at fs/4 its grid (1/8, 3/8, ...) misses
     * the crest halfway between two samples by 1/8 sample (cos(pi/16): -0.17 dB), where
     * libebur128's grid has a point on it. Both readings are right for their filters. */
    s = sig_new(2, 48000, 5);
    sig_sine(&s, 12000, 0.5, M_PI / 4);
    sig_fade(&s, 0.02);
    run_signal("fs/4 sine at 45 deg, amp 0.5, 48k", &s, 1, 0);

    s = sig_new(2, 44100, 5);
    sig_sine(&s, 5000, 0.9, 0.3);
    sig_fade(&s, 0.02);
    run_signal("5 kHz sine amp 0.9, 44.1k", &s, 1, 0);

    /* Samples that miss the crests of a 1 kHz sine at 11.025 kHz (11 a period): the
     * standard's filter reads 4 kHz-at-44.1-kHz-like content about 0.2 dB high. */
    s = sig_new(1, 11025, 5);
    sig_sine(&s, 1000, 0.9, 0.123);
    sig_fade(&s, 0.02);
    run_signal("1 kHz sine amp 0.9, 1ch 11.025k", &s, 1, 0);

    s = sig_new(6, 48000, 30);
    for (int c = 0; c < 6; c++) {
        testsig one = sig_new(1, 48000, 30);
        sig_programme(&one, -20 - 3 * c, 20 + (uint64_t)c, 0, one.frames);
        for (size_t i = 0; i < s.frames; i++) s.x[i * 6 + (size_t)c] = one.x[i];
        free(one.x);
    }
    run_signal("speech-like 5.1, 48k", &s, 0, 0);

    s = sig_new(2, 96000, 20);
    sig_programme(&s, -16, 30, 0, s.frames);
    run_signal("speech-like, 2ch 96k (eb: 2x)", &s, 1, 0);

    s = sig_new(2, 192000, 10);
    sig_programme(&s, -16, 31, 0, s.frames);
    run_signal("speech-like, 2ch 192k (eb: 1x)", &s, 1, 0);
}

/* ------------------------------------------------------------ decoding */

typedef struct {
    mpg123_handle *h;
    int channels;
    long rate;
} decoder;

/* As the app opens MP3s: float output at the file's own rate and layout, gapless. */
static int dec_open(decoder *d, const char *path) {
    int err = 0;
    d->h = mpg123_new(NULL, &err);
    if (!d->h) return -1;
    mpg123_param(d->h, MPG123_ADD_FLAGS, MPG123_GAPLESS | MPG123_QUIET, 0);
    mpg123_param(d->h, MPG123_REMOVE_FLAGS, MPG123_FUZZY, 0);
    mpg123_format_none(d->h);
    const long *rates = NULL;
    size_t nrates = 0;
    mpg123_rates(&rates, &nrates);
    for (size_t i = 0; i < nrates; i++)
        mpg123_format(d->h, rates[i], MPG123_MONO | MPG123_STEREO, MPG123_ENC_FLOAT_32);
    if (mpg123_open(d->h, path) != MPG123_OK) {
        fprintf(stderr, "%s: %s\n", path, mpg123_strerror(d->h));
        mpg123_delete(d->h);
        return -1;
    }
    int enc = 0;
    if (mpg123_getformat(d->h, &d->rate, &d->channels, &enc) != MPG123_OK || enc != MPG123_ENC_FLOAT_32) {
        fprintf(stderr, "%s: no float format\n", path);
        mpg123_close(d->h);
        mpg123_delete(d->h);
        return -1;
    }
    return 0;
}

/* Frames read, 0 at the end. */
static size_t dec_read(decoder *d, float *buf, size_t frames) {
    size_t got = 0;
    int rc = mpg123_read(d->h, buf, frames * (size_t)d->channels * sizeof(float), &got);
    if (rc != MPG123_OK && rc != MPG123_DONE && rc != MPG123_NEW_FORMAT) {
        if (got == 0) return 0;
    }
    if (got == 0 && rc == MPG123_NEW_FORMAT) return dec_read(d, buf, frames);
    return got / (sizeof(float) * (size_t)d->channels);
}

static void dec_close(decoder *d) {
    mpg123_close(d->h);
    mpg123_delete(d->h);
}

static void run_files(int argc, char **argv) {
    print_header();
    float *buf = malloc(CHUNK * MAXCH * sizeof(float));
    for (int i = 0; i < argc; i++) {
        decoder d;
        if (dec_open(&d, argv[i]) != 0) continue;   /* not audio: nothing to measure */
        meters ms;
        meters_init(&ms, d.channels, (int)d.rate);
        size_t n, total = 0;
        while ((n = dec_read(&d, buf, CHUNK)) > 0) {
            meters_add(&ms, buf, n);
            total += n;
        }
        dec_close(&d);
        const char *base = strrchr(argv[i], '/');
        char name[80];
        snprintf(name, sizeof name, "%s (%dch %ld, %.0f s)", base ? base + 1 : argv[i], d.channels, d.rate,
                 (double)total / (double)d.rate);
        /* On real programme the two true peaks differ by up to a few tenths of a dB
         * (the two filters and grids): shown, the reference is what must agree. */
        meters_report(&ms, name, 1);
    }
    free(buf);
}

/* ------------------------------------------------------------ timing */

enum { DECODE_ONLY, DECODE_SM, DECODE_EB, DECODE_EB_TP };

static double time_decode(const char *path, int what, double *check) {
    float *buf = malloc(CHUNK * MAXCH * sizeof(float));
    double t0 = cpu_now();
    decoder d;
    if (dec_open(&d, path) != 0) exit(2);
    sm_meter *sm = what == DECODE_SM ? sm_meter_new(d.channels, (int)d.rate) : NULL;
    ebur128_state *eb = NULL;
    if (what == DECODE_EB) eb = ebur128_init((unsigned)d.channels, (unsigned long)d.rate, EBUR128_MODE_I);
    if (what == DECODE_EB_TP)
        eb = ebur128_init((unsigned)d.channels, (unsigned long)d.rate, EBUR128_MODE_I | EBUR128_MODE_TRUE_PEAK);
    size_t n;
    double sum = 0;
    while ((n = dec_read(&d, buf, CHUNK)) > 0) {
        if (sm) sm_meter_add(sm, buf, n);
        else if (eb) ebur128_add_frames_float(eb, buf, n);
        else sum += buf[0];   /* keep the decode honest */
    }
    double l = 0;
    if (sm) {
        sm_meter_loudness(sm, &l);
        l += sm_meter_true_peak(sm);
        sm_meter_free(sm);
    }
    if (eb) {
        ebur128_loudness_global(eb, &l);
        ebur128_destroy(&eb);
    }
    dec_close(&d);
    double t = cpu_now() - t0;
    *check = l + sum;
    free(buf);
    return t;
}

/* user + system CPU of `mpg123 -q -t FILE`, as bench/lib.sh measures it. */
static double time_mpg123(const char *path) {
    pid_t pid;
    char *args[] = {"mpg123", "-q", "-t", (char *)path, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", 1, 0);
    if (posix_spawnp(&pid, "mpg123", &fa, NULL, args, environ) != 0) return -1;
    posix_spawn_file_actions_destroy(&fa);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) return -1;
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

static double minv(double a, double b) { return a < b ? a : b; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { MAXRUNS = 32 };

static void run_time(const char *path, int runs, int with_eb_tp) {
    if (runs < 1) runs = 1;
    if (runs > MAXRUNS) runs = MAXRUNS;
    double t[5][MAXRUNS], best[5], check;
    const int kinds = with_eb_tp ? 5 : 4;
    /* Interleaved, so a busy moment on the machine hits all of them alike. */
    for (int r = 0; r < runs; r++) {
        t[0][r] = time_mpg123(path);
        t[1][r] = time_decode(path, DECODE_ONLY, &check);
        t[2][r] = time_decode(path, DECODE_SM, &check);
        t[3][r] = time_decode(path, DECODE_EB, &check);
        if (with_eb_tp) t[4][r] = time_decode(path, DECODE_EB_TP, &check);
        fprintf(stderr, "run %d done\n", r + 1);
    }
    const char *what[5] = {"mpg123 -q -t", "decode only (libmpg123, float)", "decode + sm_meter",
                           "decode + libebur128 MODE_I", "decode + libebur128 MODE_I|TRUE_PEAK"};
    double med[5];
    for (int i = 0; i < kinds; i++) {
        best[i] = t[i][0];
        for (int r = 1; r < runs; r++) best[i] = minv(best[i], t[i][r]);
        med[i] = median(t[i], runs);
    }
    printf("%s, CPU seconds, best of %d (and median)\n", path, runs);
    for (int i = 0; i < kinds; i++)
        printf("  %-38s %7.3f s  %5.3f x mpg123   (median %7.3f s  %5.3f x)\n", what[i], best[i],
               best[i] / best[0], med[i], med[i] / med[0]);

    /* The meter alone, over PCM already decoded into memory. */
    decoder d;
    if (dec_open(&d, path) != 0) exit(2);
    size_t cap = (size_t)1 << 20, len = 0, n;
    float *pcm = malloc(cap * (size_t)d.channels * sizeof(float));
    for (;;) {
        if (len + CHUNK > cap) pcm = realloc(pcm, (cap *= 2) * (size_t)d.channels * sizeof(float));
        if ((n = dec_read(&d, pcm + len * (size_t)d.channels, CHUNK)) == 0) break;
        len += n;
    }
    dec_close(&d);
    double sm_best = 1e9, eb_best = 1e9, l = 0, tp = 0;
    for (int r = 0; r < runs; r++) {
        double t0 = cpu_now();
        sm_meter *sm = sm_meter_new(d.channels, (int)d.rate);
        for (size_t i = 0; i < len; i += CHUNK)
            sm_meter_add(sm, pcm + i * (size_t)d.channels, len - i < CHUNK ? len - i : CHUNK);
        sm_meter_loudness(sm, &l);
        tp = sm_meter_true_peak(sm);
        sm_meter_free(sm);
        sm_best = minv(sm_best, cpu_now() - t0);
    }
    for (int r = 0; r < (runs < 2 ? runs : 2); r++) {
        double t0 = cpu_now();
        ebur128_state *eb = ebur128_init((unsigned)d.channels, (unsigned long)d.rate, EBUR128_MODE_I);
        for (size_t i = 0; i < len; i += CHUNK)
            ebur128_add_frames_float(eb, pcm + i * (size_t)d.channels, len - i < CHUNK ? len - i : CHUNK);
        ebur128_loudness_global(eb, &check);
        ebur128_destroy(&eb);
        eb_best = minv(eb_best, cpu_now() - t0);
    }
    printf("  over PCM in memory (%.0f s of audio, %zu frames):\n", (double)len / (double)d.rate, len);
    printf("  %-38s %7.3f s  %5.3f x mpg123  (%.2f ns/frame; %.3f LUFS, %.3f dBTP)\n", "sm_meter alone", sm_best,
           sm_best / best[0], 1e9 * sm_best / (double)len, l, db(tp));
    printf("  %-38s %7.3f s  %5.3f x mpg123\n", "libebur128 MODE_I alone", eb_best, eb_best / best[0]);
    free(pcm);
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "test") == 0) {
        run_tests();
    } else if (argc >= 3 && strcmp(argv[1], "check") == 0) {
        run_files(argc - 2, argv + 2);
    } else if (argc >= 3 && strcmp(argv[1], "time") == 0) {
        run_time(argv[2], argc >= 4 ? atoi(argv[3]) : 3, argc >= 5 && strcmp(argv[4], "tp") == 0);
        return 0;
    } else {
        fprintf(stderr, "usage: %s test | check FILE... | time FILE [RUNS [tp]]\n", argv[0]);
        return 2;
    }
    printf("* libebur128's true peak is measured with another filter and grid (see the top of\n"
           "  meter-check.c): shown, not held to 0.1 dB; the ref 4x column is what must agree.\n");
    printf(failures ? "%d FAILED\n" : "all ok\n", failures);
    return failures ? 1 : 0;
}
