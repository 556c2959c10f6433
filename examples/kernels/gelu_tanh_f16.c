#include <math.h>
#include <stddef.h>
/* tanh-GELU over _Float16 arrays.  Without native fp16 arithmetic, GCC evaluates _Float16
   expressions in float and rounds at each assignment (-fexcess-precision=standard). */
void gelu_tanh_f16(const _Float16 *x, _Float16 *y, size_t n) {
    for (size_t i = 0; i < n; i++) {
        _Float16 u = (_Float16)0.7978845608f * (x[i] + (_Float16)0.044715f * x[i] * x[i] * x[i]);
        y[i] = (_Float16)0.5f * x[i] * ((_Float16)1.0f + (_Float16)tanhf(u));
    }
}
