/* Float samples to the integer formats a device may take (S16 with TPDF dither, S32), the
 * loudest sample of a block (the mixer's limiter checks it first), and a voice's samples
 * times its gain into the mix with the loudest of them found in the same pass. */
#include "caudio.h"

#include <math.h>
#include <string.h>

typedef float sm_v4f __attribute__((vector_size(16)));
typedef int32_t sm_v4i __attribute__((vector_size(16)));

float sm_peak(const float *in, size_t samples) {
    /* Four lanes, two accumulators; the maximum written as a compare and a select, which
     * is one maxps (SSE2). The same loop in Swift or in plain C stays scalar or, as
     * integers, takes 25 instructions for 8 samples on SSE2 (no unsigned maximum there)
     * where this takes 11. A NaN never replaces a maximum (the compare is false for it),
     * so it hides no loud sample before it; the bend leaves NaN as it is. */
    sm_v4f m0 = {0, 0, 0, 0}, m1 = m0;
    const sm_v4i magnitude = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
    size_t i = 0;
    for (; i + 8 <= samples; i += 8) {
        sm_v4f a, b;
        memcpy(&a, in + i, sizeof a);
        memcpy(&b, in + i + 4, sizeof b);
        a = (sm_v4f)((sm_v4i)a & magnitude);
        b = (sm_v4f)((sm_v4i)b & magnitude);
        sm_v4i ka = a > m0, kb = b > m1;
        m0 = (sm_v4f)(((sm_v4i)a & ka) | ((sm_v4i)m0 & ~ka));
        m1 = (sm_v4f)(((sm_v4i)b & kb) | ((sm_v4i)m1 & ~kb));
    }
    float m = 0;
    for (int k = 0; k < 4; k++) {
        if (m0[k] > m) m = m0[k];
        if (m1[k] > m) m = m1[k];
    }
    for (; i < samples; i++) {
        float a = fabsf(in[i]);
        if (a > m) m = a;
    }
    return m;
}

/* Sixteen samples of `src` times `g`, written to or added to `out`; their magnitudes are
 * folded into the four running maxima (a compare and a select: maxps on SSE2). */
#define SM_GAIN_BLOCK(ASSIGN)                                                        \
    do {                                                                             \
        sm_v4f v[4];                                                                 \
        memcpy(v, src + i, sizeof v);                                                \
        for (int k = 0; k < 4; k++) v[k] *= g;                                       \
        if (ASSIGN) {                                                                \
            memcpy(out + i, v, sizeof v);                                            \
        } else {                                                                     \
            sm_v4f o[4];                                                             \
            memcpy(o, out + i, sizeof o);                                            \
            for (int k = 0; k < 4; k++) o[k] += v[k];                                \
            memcpy(out + i, o, sizeof o);                                            \
        }                                                                            \
        for (int k = 0; k < 4; k++) {                                                \
            sm_v4f a = (sm_v4f)((sm_v4i)v[k] & magnitude);                           \
            sm_v4i take = a > m[k];                                                  \
            m[k] = (sm_v4f)(((sm_v4i)a & take) | ((sm_v4i)m[k] & ~take));            \
        }                                                                            \
    } while (0)

float sm_gain(float *restrict out, const float *restrict src, size_t samples, float gain, int assign) {
    /* sm_peak's loop with the multiply and the store in it: one pass over the voice's
     * samples instead of the mixer's pass and then the limiter's. Sixteen samples a turn
     * in two loops (write, add), so the turn's own instructions and the branch are paid
     * once per sixteen. */
    const sm_v4f g = {gain, gain, gain, gain};
    sm_v4f m[4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    const sm_v4i magnitude = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
    size_t i = 0;
    if (assign) {
        for (; i + 16 <= samples; i += 16) SM_GAIN_BLOCK(1);
    } else {
        for (; i + 16 <= samples; i += 16) SM_GAIN_BLOCK(0);
    }
    float peak = 0;
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < 4; l++)
            if (m[k][l] > peak) peak = m[k][l];
    for (; i < samples; i++) {
        float v = src[i] * gain;
        if (assign) out[i] = v; else out[i] += v;
        float a = fabsf(v);
        if (a > peak) peak = a;
    }
    /* A NaN is passed over (it never replaces a maximum), as in sm_peak. */
    return peak;
}

void sm_convert_s16(const float *in, int16_t *out, size_t samples, uint32_t *state) {
    uint32_t x = *state ? *state : 0x9E3779B9u;
    for (size_t i = 0; i < samples; i++) {
        /* TPDF dither: the difference of two uniform variables (the two halves of one
         * xorshift step, 16 bits each), +-1 LSB peak. */
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        float d = (float)(int32_t)((x & 0xFFFFu) - (x >> 16)) * (1.0f / 65536.0f);
        float v = in[i] * 32767.0f + d;
        /* Clamped, then rounded by truncating a positive number (no libm call per sample). */
        if (v > 32767.0f) v = 32767.0f;
        if (!(v >= -32768.0f)) v = -32768.0f;   /* NaN too */
        out[i] = (int16_t)((int32_t)(v + 32768.5f) - 32768);
    }
    *state = x;
}

void sm_convert_s32(const float *in, int32_t *out, size_t samples) {
    for (size_t i = 0; i < samples; i++) {
        double v = (double)in[i] * 2147483647.0;
        if (v > 2147483647.0) v = 2147483647.0;
        if (v < -2147483648.0) v = -2147483648.0;
        out[i] = (int32_t)lrint(v);
    }
}
