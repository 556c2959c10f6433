#include <math.h>
#include <stddef.h>
/* tanh-GELU over float arrays, as a SIMD-friendly loop */
void gelu_tanh(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float u = 0.7978845608f * (x[i] + 0.044715f * x[i] * x[i] * x[i]);
        y[i] = 0.5f * x[i] * (1.0f + tanhf(u));
    }
}
