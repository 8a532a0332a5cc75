/*
 * sm_meter: integrated loudness (ITU-R BS.1770-4, EBU R128) and true peak (BS.1770-4
 * Annex 2) of a whole programme, in one pass over the decoded float samples.
 *
 * Loudness. K-weighting is the two biquads of BS.1770 (high shelf, then high pass),
 * with coefficients derived for the actual sample rate by the same formulas as
 * libebur128 (ebur128_init_filter). They run in double precision as a cascade in
 * direct form I; the shelf's output is the high pass's input history, so a channel's
 * whole state is six numbers, kept in locals through the loop. Stereo runs both
 * channels in one two-lane vector, which costs what one channel costs. Mean squares are
 * summed per 100-ms sub-block; a gating block (400 ms, 75 % overlap) is the sum of
 * four consecutive sub-blocks. Blocks above the absolute gate (-70 LUFS) are kept, as
 * libebur128 keeps them in EBUR128_MODE_I, so the relative gate is exact: 8 bytes per
 * 100 ms, about 0.3 MB per hour of programme.
 *
 * True peak. The 48-tap interpolator of Annex 2 as four phases of 12 taps. Its length
 * is even, so the four outputs between samples k and k+1 lie at k + 1/8, 3/8, 5/8 and
 * 7/8: none falls on a sample, and the reading is max(|samples|, |all four phases|).
 * The intervals evaluated are those between two real samples (the first is preceded
 * and the last followed by zeros where the filter reaches past them).
 * Oversampling everything costs 48 multiply-adds per sample; instead each block of 128
 * intervals is screened with two bounds that hold for any signal:
 *   |y| <= G * M                          G = sum |h| of a phase (~2.02)
 *   |y| <= S * M + E * D                  the two-tap linear interpolation plus what
 *                                         the filter adds on top, which only second
 *                                         differences can produce
 * where M is the largest |x| and D the largest |second difference| the block's
 * filter windows see. Only a block whose smaller bound exceeds the peak found so far
 * is oversampled. On music and speech D is small next to M (energy lies low in the
 * spectrum), so only blocks at the loudest crests are: well under 1 % on the material
 * tried. Inside such a block, each group of four intervals is checked once more with
 * Cauchy-Schwarz (|y| <= |h| |x| over its window), which clears most of a block of
 * noise. Only flat, dense noise near full scale ends up oversampled nearly everywhere:
 * slower (about four times ordinary programme), never less accurate. The result equals
 * full oversampling: the bounds carry a margin far above float rounding.
 *
 * Denormals: the filter runs in double precision, whose normal range goes down to
 * 1e-308, and any state below 1e-30 is flushed to zero at each 100-ms boundary. After
 * a signal stops dead, the shelf's fast-decaying state can still reach the denormal
 * range within one sub-block (for a few thousand samples at most) before that flush;
 * no FTZ/DAZ mode is needed, so this behaves the same on x86 and ARM.
 *
 * No global mutable state; one meter must not be used by two threads at once.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include "cloudness.h"

enum {
    MAX_CHANNELS = 8,
    TP_TAPS = 12,
    TP_PHASES = 4,
    TP_BLOCK = 128,  /* intervals screened together (a multiple of 4) */
    TP_LEFT = 8,     /* samples kept before the first pending interval */
    TP_RIGHT = 9,    /* samples a block needs after its last interval's left sample */
    TP_CAP = 1024    /* per-channel buffer, in samples */
};

/* A skipped block's bound must stay below the peak by more than float rounding in the
 * bound and in the oversampling could account for (~1e-6). */
#define TP_MARGIN 1.0001f

/* BS.1770-4 Annex 2, Table 1: phase p, tap t. Phase p evaluated with x[i] at tap 6
 * and x[i+1] at tap 5 gives the signal at i + (2p + 1) / 8. */
static const float tp_coef[TP_PHASES][TP_TAPS] = {
    { 0.0017089843750f,  0.0109863281250f, -0.0196533203125f,  0.0332031250000f,
     -0.0594482421875f,  0.1373291015625f,  0.9721679687500f, -0.1022949218750f,
      0.0476074218750f, -0.0266113281250f,  0.0148925781250f, -0.0083007812500f},
    {-0.0291748046875f,  0.0292968750000f, -0.0517578125000f,  0.0891113281250f,
     -0.1665039062500f,  0.4650878906250f,  0.7797851562500f, -0.2003173828125f,
      0.1015625000000f, -0.0582275390625f,  0.0330810546875f, -0.0189208984375f},
    {-0.0189208984375f,  0.0330810546875f, -0.0582275390625f,  0.1015625000000f,
     -0.2003173828125f,  0.7797851562500f,  0.4650878906250f, -0.1665039062500f,
      0.0891113281250f, -0.0517578125000f,  0.0292968750000f, -0.0291748046875f},
    {-0.0083007812500f,  0.0148925781250f, -0.0266113281250f,  0.0476074218750f,
     -0.1022949218750f,  0.9721679687500f,  0.1373291015625f, -0.0594482421875f,
      0.0332031250000f, -0.0196533203125f,  0.0109863281250f,  0.0017089843750f},
};

/* GCC and Clang vector extensions: SSE2 on x86-64, NEON on ARM, plain scalar code
 * elsewhere. Loads go through memcpy, so no alignment is assumed. */
typedef double v2d __attribute__((vector_size(16)));
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f load4(const float *p) { v4f v; memcpy(&v, p, sizeof v); return v; }
static inline v4f abs4(v4f x) { return (v4f)((v4i)x & 0x7fffffff); }
static inline v4f max4(v4f a, v4f b) {
#if defined(__SSE__)
    return _mm_max_ps(a, b);    /* GCC does not turn the select below into this */
#elif defined(__ARM_NEON)
    return (v4f)vmaxq_f32((float32x4_t)a, (float32x4_t)b);
#else
    v4i gt = a > b;
    return (v4f)((gt & (v4i)a) | (~gt & (v4i)b));
#endif
}
static inline float hmax4(v4f v) {
    float a = v[0] > v[1] ? v[0] : v[1], b = v[2] > v[3] ? v[2] : v[3];
    return a > b ? a : b;
}

typedef struct kweight {
    double b0, b1, b2, a1, a2;   /* high shelf */
    double c1, c2;               /* high pass (its numerator is 1, -2, 1) */
} kweight;

typedef void (*kweight_stereo_fn)(sm_meter *m, const float *in, size_t n, float *l, float *r);
typedef void (*kweight_channel_fn)(sm_meter *m, int c, const float *in, size_t n, float *out);

struct sm_meter {
    int channels;
    kweight_stereo_fn stereo;    /* the K-weighting loops for this CPU */
    kweight_channel_fn channel;
    size_t sub_len;              /* frames per 100 ms, rounded as libebur128 does */
    size_t sub_fill;
    kweight k;
    double weight[MAX_CHANNELS];
    double state[MAX_CHANNELS][6];   /* x1 x2 (input), u1 u2 (shelf), v1 v2 (high pass) */
    double sub_sum[MAX_CHANNELS];    /* sum of squares in the current sub-block */
    double recent[3];            /* weighted energies of the last three sub-blocks */
    unsigned subs_seen;
    double abs_gate;             /* block energy at -70 LUFS */
    double *blocks;              /* energies of the blocks above the absolute gate */
    size_t nblocks, cap_blocks;
    int oom;

    float tp_S[TP_PHASES], tp_E[TP_PHASES], tp_G;  /* screening bounds, see above */
    float tp_N2;                 /* (largest |h| of a phase, times the margin)^2 */
    v4f tp_sym[4][TP_TAPS / 2];  /* folded coefficients, each in all four lanes */
    float peak;                  /* of everything screened or oversampled so far */
    size_t tp_len;               /* samples in each channel's buffer */
    float tp_buf[];              /* channels x TP_CAP */
};

/* ------------------------------------------------------------ K-weighting */

/* The loops below are bound by their loop-carried dependency: the feedback terms are
 * subtracted last, so it is one multiply and one subtract per stage and sample (one
 * fused multiply-add where the CPU has it, see kweight_select). */
#define KW_INLINE static inline __attribute__((always_inline))

/* Stereo: both channels in the two lanes of one vector; also deinterleaves into the
 * true-peak buffers. */
KW_INLINE void kweight_stereo(sm_meter *m, const float *in, size_t n, float *l, float *r) {
    const kweight *k = &m->k;
    const v2d b0 = {k->b0, k->b0}, b1 = {k->b1, k->b1}, b2 = {k->b2, k->b2};
    const v2d a1 = {k->a1, k->a1}, a2 = {k->a2, k->a2};
    const v2d c1 = {k->c1, k->c1}, c2 = {k->c2, k->c2};
    double (*s)[6] = m->state;
    v2d x1 = {s[0][0], s[1][0]}, x2 = {s[0][1], s[1][1]};
    v2d u1 = {s[0][2], s[1][2]}, u2 = {s[0][3], s[1][3]};
    v2d v1 = {s[0][4], s[1][4]}, v2 = {s[0][5], s[1][5]};
    v2d acc = {0, 0};
    for (size_t i = 0; i < n; i++) {
        float xl = in[2 * i], xr = in[2 * i + 1];
        l[i] = xl;
        r[i] = xr;
        v2d x0 = {xl, xr};
        v2d u0 = (b0 * x0 + b1 * x1 + b2 * x2 - a2 * u2) - a1 * u1;
        v2d v0 = ((u0 + u2) - (u1 + u1) - c2 * v2) - c1 * v1;
        acc += v0 * v0;
        x2 = x1; x1 = x0;
        u2 = u1; u1 = u0;
        v2 = v1; v1 = v0;
    }
    for (int c = 0; c < 2; c++) {
        s[c][0] = x1[c]; s[c][1] = x2[c];
        s[c][2] = u1[c]; s[c][3] = u2[c];
        s[c][4] = v1[c]; s[c][5] = v2[c];
        m->sub_sum[c] += acc[c];
    }
}

/* One channel of any layout (mono, or three and more channels one after another). */
KW_INLINE void kweight_channel(sm_meter *m, int c, const float *in, size_t n, float *out) {
    const kweight *k = &m->k;
    const double b0 = k->b0, b1 = k->b1, b2 = k->b2, a1 = k->a1, a2 = k->a2;
    const double c1 = k->c1, c2 = k->c2;
    const size_t stride = (size_t)m->channels;
    double *s = m->state[c];
    double x1 = s[0], x2 = s[1], u1 = s[2], u2 = s[3], v1 = s[4], v2 = s[5];
    double acc = 0;
    in += c;
    for (size_t i = 0; i < n; i++) {
        float xf = in[i * stride];
        out[i] = xf;
        double x0 = xf;
        double u0 = (b0 * x0 + b1 * x1 + b2 * x2 - a2 * u2) - a1 * u1;
        double v0 = ((u0 + u2) - (u1 + u1) - c2 * v2) - c1 * v1;
        acc += v0 * v0;
        x2 = x1; x1 = x0;
        u2 = u1; u1 = u0;
        v2 = v1; v1 = v0;
    }
    s[0] = x1; s[1] = x2; s[2] = u1; s[3] = u2; s[4] = v1; s[5] = v2;
    m->sub_sum[c] += acc;
}

static void kweight_stereo_base(sm_meter *m, const float *in, size_t n, float *l, float *r) {
    kweight_stereo(m, in, n, l, r);
}
static void kweight_channel_base(sm_meter *m, int c, const float *in, size_t n, float *out) {
    kweight_channel(m, c, in, n, out);
}

/* x86-64's baseline has no fused multiply-add; most x86 CPUs since 2013 do, and there
 * it shortens each stage's dependency from a multiply plus a subtract to one FMA (the
 * compilers contract a * b + c by themselves in these functions). AArch64 has FMA in
 * its baseline and needs none of this. */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define KW_HAVE_FMA_VARIANT 1
__attribute__((target("fma")))
static void kweight_stereo_fma(sm_meter *m, const float *in, size_t n, float *l, float *r) {
    kweight_stereo(m, in, n, l, r);
}
__attribute__((target("fma")))
static void kweight_channel_fma(sm_meter *m, int c, const float *in, size_t n, float *out) {
    kweight_channel(m, c, in, n, out);
}
#endif

static void kweight_select(sm_meter *m) {
    m->stereo = kweight_stereo_base;
    m->channel = kweight_channel_base;
#ifdef KW_HAVE_FMA_VARIANT
    if (__builtin_cpu_supports("fma")) {    /* also checks that the OS saves AVX state */
        m->stereo = kweight_stereo_fma;
        m->channel = kweight_channel_fma;
    }
#endif
}

/* ------------------------------------------------------------ gating blocks */

static void push_block(sm_meter *m, double energy) {
    if (energy < m->abs_gate) return;
    if (m->nblocks == m->cap_blocks) {
        size_t cap = m->cap_blocks ? 2 * m->cap_blocks : 4096;
        double *b = realloc(m->blocks, cap * sizeof *b);
        if (!b) { m->oom = 1; return; }
        m->blocks = b;
        m->cap_blocks = cap;
    }
    m->blocks[m->nblocks++] = energy;
}

static void close_subblock(sm_meter *m) {
    double e = 0;
    for (int c = 0; c < m->channels; c++) {
        e += m->weight[c] * m->sub_sum[c];
        m->sub_sum[c] = 0;
        /* Whatever is left of a decay this small is inaudible and would only
         * become denormal. */
        for (int j = 0; j < 6; j++)
            if (fabs(m->state[c][j]) < 1e-30) m->state[c][j] = 0;
    }
    if (m->subs_seen >= 3)
        push_block(m, (m->recent[0] + m->recent[1] + m->recent[2] + e) / (double)(4 * m->sub_len));
    m->recent[0] = m->recent[1];
    m->recent[1] = m->recent[2];
    m->recent[2] = e;
    m->subs_seen++;
}

/* ------------------------------------------------------------ true peak */

/* Oversamples the intervals [i0, i0 + TP_BLOCK) of w, four at a time, and returns the
 * new peak. A group of four is skipped when Cauchy-Schwarz (|y| <= |h| |x|, over each
 * interval's 12-sample window) already keeps it under the peak: that settles most of
 * a noise-like block, where the two bounds of tp_scan cannot. The windows' energies
 * come from running sums of four squares: q[k] = x[k]^2 + ... + x[k+3]^2, and the
 * window of interval i is q[i-5] + q[i-1] + q[i+3]. */
static float tp_oversample_block(const sm_meter *m, const float *w, size_t i0, float pk) {
    float sq[TP_BLOCK + 12], q[TP_BLOCK + 8];
    const float *x0 = w + i0 - 5;    /* sq[k], q[k] belong to w[i0 - 5 + k] */
    for (size_t k = 0; k < TP_BLOCK + 12; k += 4) {
        v4f v = load4(x0 + k);
        v *= v;
        memcpy(sq + k, &v, sizeof v);
    }
    for (size_t k = 0; k < TP_BLOCK + 8; k += 4) {
        v4f v = (load4(sq + k) + load4(sq + k + 1)) + (load4(sq + k + 2) + load4(sq + k + 3));
        memcpy(q + k, &v, sizeof v);
    }
    for (size_t i = i0; i < i0 + TP_BLOCK; i += 4) {
        const float *qi = q + (i - i0);
        v4f e = load4(qi) + load4(qi + 4) + load4(qi + 8);
        if (hmax4(e) * m->tp_N2 <= pk * pk) continue;
        const v4f (*h)[TP_TAPS / 2] = m->tp_sym;
        v4f s0 = {0, 0, 0, 0}, d0 = s0, s1 = s0, d1 = s0;
        for (int t = 0; t < TP_TAPS / 2; t++) {
            v4f a = load4(w + i + 6 - t), b = load4(w + i + 6 - (TP_TAPS - 1 - t));
            v4f u = a + b, v = a - b;
            s0 += h[0][t] * u;
            d0 += h[1][t] * v;
            s1 += h[2][t] * u;
            d1 += h[3][t] * v;
        }
        v4f y = max4(abs4(s0) + abs4(d0), abs4(s1) + abs4(d1));
        float top = hmax4(y);
        if (top > pk) pk = top;
    }
    return pk;
}

/* The same for one interval, in scalar code. */
static float tp_interval(const sm_meter *m, const float *w, size_t i) {
    const v4f (*h)[TP_TAPS / 2] = m->tp_sym;
    float s0 = 0, d0 = 0, s1 = 0, d1 = 0;
    for (int t = 0; t < TP_TAPS / 2; t++) {
        float a = w[i + 6 - t], b = w[i + 6 - (TP_TAPS - 1 - t)];
        float u = a + b, v = a - b;
        s0 += h[0][t][0] * u;
        d0 += h[1][t][0] * v;
        s1 += h[2][t][0] * u;
        d1 += h[3][t][0] * v;
    }
    float y0 = fabsf(s0) + fabsf(d0), y1 = fabsf(s1) + fabsf(d1);
    return y0 > y1 ? y0 : y1;
}

/* Screens the complete blocks of one channel's buffer w[0, len) and oversamples those
 * that could hold a new peak. Interval i lies between w[i] and w[i+1]; its filter
 * window is w[i-5 .. i+6], whose second differences are centred on i-4 .. i+5.
 * Returns the index of the first interval left for later. */
static size_t tp_scan(const sm_meter *m, const float *w, size_t len, float *peak) {
    float pk = *peak;
    size_t i0 = TP_LEFT;
    for (; i0 + TP_BLOCK + TP_RIGHT <= len; i0 += TP_BLOCK) {
        /* M over w[i0-8, i0+B+8), D over centres [i0-4, i0+B+8): a little wider than
         * the windows need, in whole vectors. M alone settles quiet blocks. */
        v4f mx = abs4(load4(w + i0 - 8));
        for (size_t j = i0 - 4; j < i0 + TP_BLOCK + 8; j += 4) mx = max4(mx, abs4(load4(w + j)));
        float M = hmax4(mx);
        float any = m->tp_G * M;
        if (any * TP_MARGIN <= pk) continue;
        v4f md = {0, 0, 0, 0};
        for (size_t j = i0 - 4; j < i0 + TP_BLOCK + 8; j += 4) {
            v4f c = load4(w + j);
            md = max4(md, abs4((load4(w + j - 1) + load4(w + j + 1)) - (c + c)));
        }
        float D = hmax4(md);
        float smooth = M;               /* the samples themselves count too */
        for (int p = 0; p < TP_PHASES; p++) {
            float b = m->tp_S[p] * M + m->tp_E[p] * D;
            if (b > smooth) smooth = b;
        }
        if (smooth * TP_MARGIN <= pk) continue;
        if (M > pk) pk = M;
        pk = tp_oversample_block(m, w, i0, pk);
    }
    *peak = pk;
    return i0;
}

static void tp_run(sm_meter *m) {
    size_t next = 0;
    float pk = m->peak;
    for (int c = 0; c < m->channels; c++)
        next = tp_scan(m, m->tp_buf + (size_t)c * TP_CAP, m->tp_len, &pk);
    m->peak = pk;
    size_t drop = next - TP_LEFT;
    if (drop == 0) return;
    for (int c = 0; c < m->channels; c++) {
        float *w = m->tp_buf + (size_t)c * TP_CAP;
        memmove(w, w + drop, (m->tp_len - drop) * sizeof *w);
    }
    m->tp_len -= drop;
}

/* ------------------------------------------------------------ construction */

static void kweight_init(kweight *k, double rate) {
    const double pi = 3.14159265358979323846;
    double f0 = 1681.974450955533;
    double G = 3.999843853973347;
    double Q = 0.7071752369554196;
    double K = tan(pi * f0 / rate);
    double Vh = pow(10.0, G / 20.0);
    double Vb = pow(Vh, 0.4996667741545416);
    double a0 = 1.0 + K / Q + K * K;
    k->b0 = (Vh + Vb * K / Q + K * K) / a0;
    k->b1 = 2.0 * (K * K - Vh) / a0;
    k->b2 = (Vh - Vb * K / Q + K * K) / a0;
    k->a1 = 2.0 * (K * K - 1.0) / a0;
    k->a2 = (1.0 - K / Q + K * K) / a0;

    f0 = 38.13547087602444;
    Q = 0.5003270373238773;
    K = tan(pi * f0 / rate);
    k->c1 = 2.0 * (K * K - 1.0) / (1.0 + K / Q + K * K);
    k->c2 = (1.0 - K / Q + K * K) / (1.0 + K / Q + K * K);
}

/* libebur128's default channel map: L R C, LFE unused, then the surrounds at +1.5 dB
 * (its 1.41); four channels are L R Ls Rs, five are L R C Ls Rs. */
static void channel_weights(double *w, int channels) {
    for (int c = 0; c < channels; c++) w[c] = c < 3 ? 1.0 : 0.0;
    if (channels == 4) {
        w[2] = w[3] = 1.41;
    } else if (channels == 5) {
        w[3] = w[4] = 1.41;
    } else if (channels >= 6) {
        w[3] = 0.0;
        w[4] = w[5] = 1.41;
    }
}

/* Per phase: y = a x[i] + b x[i+1] + sum_j e_j D(i+5-j), D the second difference.
 * a and b make the residual blind to constants and ramps, so it is a combination
 * of second differences (e by deconvolving [1 -2 1]). */
static void tp_bounds_init(sm_meter *m) {
    float G = 0;
    for (int p = 0; p < TP_PHASES; p++) {
        const float *h = tp_coef[p];
        double S = 0, T = 0, g = 0, d[TP_TAPS], e[TP_TAPS - 2], E = 0;
        for (int t = 0; t < TP_TAPS; t++) {
            S += h[t];
            T += t * (double)h[t];
            g += fabs(h[t]);
            d[t] = h[t];
        }
        double a = T - 5 * S, b = 6 * S - T;
        d[6] -= a;
        d[5] -= b;
        for (int j = 0; j < TP_TAPS - 2; j++) {
            e[j] = d[j] + (j >= 1 ? 2 * e[j - 1] : 0) - (j >= 2 ? e[j - 2] : 0);
            E += fabs(e[j]);
        }
        m->tp_S[p] = (float)(fabs(a) + fabs(b));
        m->tp_E[p] = (float)E;
        if ((float)g > G) G = (float)g;
        double n2 = 0;
        for (int t = 0; t < TP_TAPS; t++) n2 += (double)h[t] * h[t];
        if ((float)(n2 * TP_MARGIN * TP_MARGIN) > m->tp_N2) m->tp_N2 = (float)(n2 * TP_MARGIN * TP_MARGIN);
    }
    m->tp_G = G;
    /* Phases 3 and 2 are phases 0 and 1 reversed, so with u = x[t] + x[11-t] and
     * v = x[t] - x[11-t], half the sum and half the difference of a mirrored pair take
     * six taps each, and max(|y0|, |y3|) = |(y0 + y3) / 2| + |(y0 - y3) / 2|. */
    for (int pair = 0; pair < 2; pair++) {
        const float *h = tp_coef[pair];
        for (int t = 0; t < TP_TAPS / 2; t++) {
            float sum = 0.5f * (h[t] + h[TP_TAPS - 1 - t]), dif = 0.5f * (h[t] - h[TP_TAPS - 1 - t]);
            m->tp_sym[2 * pair][t] = (v4f){sum, sum, sum, sum};
            m->tp_sym[2 * pair + 1][t] = (v4f){dif, dif, dif, dif};
        }
    }
}

sm_meter *sm_meter_new(int channels, int sample_rate) {
    if (channels < 1 || channels > MAX_CHANNELS || sample_rate < 8000 || sample_rate > 192000)
        return NULL;
    /* aligned_alloc: the vectors inside need 16 bytes, which malloc gives only on
     * 64-bit platforms. */
    size_t align = _Alignof(sm_meter);
    size_t bytes = sizeof(sm_meter) + (size_t)channels * TP_CAP * sizeof(float);
    bytes = (bytes + align - 1) / align * align;
    sm_meter *m = aligned_alloc(align, bytes);
    if (!m) return NULL;
    memset(m, 0, bytes);
    m->channels = channels;
    m->sub_len = ((size_t)sample_rate + 5) / 10;
    kweight_init(&m->k, sample_rate);
    kweight_select(m);
    channel_weights(m->weight, channels);
    m->abs_gate = pow(10.0, (-70.0 + 0.691) / 10.0);
    tp_bounds_init(m);
    m->tp_len = TP_LEFT;   /* zeros before the first sample */
    return m;
}

void sm_meter_free(sm_meter *m) {
    if (!m) return;
    free(m->blocks);
    free(m);
}

/* ------------------------------------------------------------ feeding */

void sm_meter_add(sm_meter *m, const float *in, size_t frames) {
    if (!m || !in) return;
    const size_t ch = (size_t)m->channels;
    while (frames > 0) {
        size_t n = m->sub_len - m->sub_fill;
        if (n > TP_CAP - m->tp_len) n = TP_CAP - m->tp_len;
        if (n > frames) n = frames;
        float *tp = m->tp_buf + m->tp_len;
        if (ch == 2) {
            m->stereo(m, in, n, tp, tp + TP_CAP);
        } else {
            for (int c = 0; c < m->channels; c++)
                m->channel(m, c, in, n, tp + (size_t)c * TP_CAP);
        }
        m->tp_len += n;
        m->sub_fill += n;
        if (m->sub_fill == m->sub_len) {
            close_subblock(m);
            m->sub_fill = 0;
        }
        tp_run(m);
        in += n * ch;
        frames -= n;
    }
}

/* ------------------------------------------------------------ results */

int sm_meter_loudness(const sm_meter *m, double *lufs) {
    if (m->oom) return -2;
    if (m->nblocks == 0) return -1;
    double sum = 0;
    for (size_t i = 0; i < m->nblocks; i++) sum += m->blocks[i];
    double threshold = sum / (double)m->nblocks * pow(10.0, -10.0 / 10.0);
    double gated = 0;
    size_t n = 0;
    for (size_t i = 0; i < m->nblocks; i++) {
        if (m->blocks[i] >= threshold) {
            gated += m->blocks[i];
            n++;
        }
    }
    if (n == 0) return -1;   /* cannot happen: the largest block is above the mean */
    *lufs = 10.0 * (log(gated / (double)n) / log(10.0)) - 0.691;
    return 0;
}

/* The buffered tail is measured here, with zeros after the last sample, without
 * changing the meter: more frames may follow. */
double sm_meter_true_peak(const sm_meter *m) {
    float pk = m->peak;
    const size_t len = m->tp_len;
    float w[TP_CAP + TP_TAPS];
    for (int c = 0; c < m->channels; c++) {
        memcpy(w, m->tp_buf + (size_t)c * TP_CAP, len * sizeof *w);
        memset(w + len, 0, TP_TAPS * sizeof *w);
        for (size_t i = 0; i < len; i++)
            if (fabsf(w[i]) > pk) pk = fabsf(w[i]);
        for (size_t i = TP_LEFT; i + 1 < len; i++) {
            float y = tp_interval(m, w, i);
            if (y > pk) pk = y;
        }
    }
    return pk;
}
