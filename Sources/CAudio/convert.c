/* Float samples to the integer formats a device may take (S16 with TPDF dither, S32). */
#include "caudio.h"

#include <math.h>

void sm_convert_s16(const float *in, int16_t *out, size_t samples, uint32_t *state) {
    uint32_t x = *state ? *state : 0x9E3779B9u;
    for (size_t i = 0; i < samples; i++) {
        /* TPDF dither: the difference of two uniform variables, +-1 LSB peak. */
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        float u1 = (float)(x >> 8) * (1.0f / 16777216.0f);
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        float u2 = (float)(x >> 8) * (1.0f / 16777216.0f);
        float v = in[i] * 32767.0f + (u1 - u2);
        long s = lrintf(v);
        if (s > 32767) s = 32767;
        if (s < -32768) s = -32768;
        out[i] = (int16_t)s;
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
