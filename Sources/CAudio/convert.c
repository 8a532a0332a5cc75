/* Float samples to the integer formats a device may take (S16 with TPDF dither, S32). */
#include "caudio.h"

#include <math.h>

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
