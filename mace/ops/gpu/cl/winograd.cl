// Winograd convolution F(m x m, 3 x 3), m = 2 or 4 (`winograd: 2|4` in the .yml):
//   U = B^T d B per (m+2)^2 input tile, M = V * U per tile position (a batched GEMM over
//   channels), y = A^T M A. U, V and M are height-major images (docs/gpu.md):
//   U is the NHWC tensor (T, C, P, 1) -> pixel (p, t * C4 + cb) holds 4 channels,
//   V is (T, O, C, 1) -> pixel (c, t * O4 + ob), M is (T, O, P, 1) -> pixel (p, t * O4 + ob),
//   with T = (m+2)^2 positions and P = N * tiles_h * tiles_w tiles.

__constant float BT2[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
__constant float AT2[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
__constant float BT4[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                              {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
__constant float AT4[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0},
                              {0, 1, -1, 8, -8, 1}};

// gws = [P, C4]
#define WINO_INPUT(NAME, A, BT)                                                            \
  __kernel void NAME(__read_only image2d_t input, __write_only image2d_t u, int in_h,      \
                     int in_w, int channels, int tiles_h, int tiles_w, int tiles,          \
                     int pad_t, int pad_l) {                                               \
    int p = get_global_id(0), cb = get_global_id(1), c4 = (channels + 3) / 4;              \
    if (p >= tiles || cb >= c4) return;                                                    \
    int per_n = tiles_h * tiles_w, n = p / per_n;                                          \
    int h0 = (p % per_n) / tiles_w * (A - 2) - pad_t, w0 = p % tiles_w * (A - 2) - pad_l;  \
    float4 d[A][A], t[A][A];                                                               \
    for (int i = 0; i < A; ++i)                                                            \
      for (int j = 0; j < A; ++j) {                                                        \
        int h = h0 + i, w = w0 + j;                                                        \
        d[i][j] = h >= 0 && h < in_h && w >= 0 && w < in_w                                 \
                      ? READ(input, cb * in_w + w, n * in_h + h) : (float4)(0.0f);         \
      }                                                                                    \
    for (int i = 0; i < A; ++i)                                                            \
      for (int j = 0; j < A; ++j) {                                                        \
        float4 s = 0.0f;                                                                   \
        for (int k = 0; k < A; ++k) s += BT[i][k] * d[k][j];                               \
        t[i][j] = s;                                                                       \
      }                                                                                    \
    for (int i = 0; i < A; ++i)                                                            \
      for (int j = 0; j < A; ++j) {                                                        \
        float4 s = 0.0f;                                                                   \
        for (int k = 0; k < A; ++k) s += t[i][k] * BT[j][k];                               \
        WRITE_F32(u, p, (i * A + j) * c4 + cb, s);                                         \
      }                                                                                    \
  }

WINO_INPUT(winograd_input_2, 4, BT2)
WINO_INPUT(winograd_input_4, 6, BT4)

// M[t, o, p] = sum_c V[t, o, c] U[t, c, p]. gws = [O4, P, T]
__kernel void winograd_gemm(__read_only image2d_t u, __read_only image2d_t v,
                            __write_only image2d_t m, int channels, int out_c, int tiles, int alpha2) {
  int ob = get_global_id(0), p = get_global_id(1), t = get_global_id(2);
  int o4 = (out_c + 3) / 4, c4 = (channels + 3) / 4;
  if (ob >= o4 || p >= tiles || t >= alpha2) return;
  float4 acc = 0.0f;
  int vy = t * o4 + ob;
  for (int cb = 0; cb < c4; ++cb) {
    float4 x = READ(u, p, t * c4 + cb);
    int c = cb * 4;  // V's width is C: reads past it are the sampler's zeros
    acc += x.x * READ(v, c, vy) + x.y * READ(v, c + 1, vy) + x.z * READ(v, c + 2, vy) +
           x.w * READ(v, c + 3, vy);
  }
  WRITE_F32(m, p, vy, acc);
}

// gws = [O4, P]
#define WINO_OUTPUT(NAME, A, AT)                                                             \
  __kernel void NAME(__read_only image2d_t m, __read_only image2d_t bias,                    \
                     __write_only image2d_t output, int out_h, int out_w, int out_c,          \
                     int tiles_h, int tiles_w, int tiles, int has_bias, int act, float alpha, \
                     float limit RANGE_ARG) {                                                           \
    int ob = get_global_id(0), p = get_global_id(1), o4 = (out_c + 3) / 4;                   \
    if (ob >= o4 || p >= tiles) return;                                                      \
    int per_n = tiles_h * tiles_w, n = p / per_n;                                            \
    int h0 = (p % per_n) / tiles_w * (A - 2), w0 = p % tiles_w * (A - 2);                    \
    float4 x[A][A], t[A - 2][A];                                                             \
    for (int i = 0; i < A; ++i)                                                              \
      for (int j = 0; j < A; ++j) x[i][j] = READ(m, p, (i * A + j) * o4 + ob);               \
    for (int i = 0; i < A - 2; ++i)                                                          \
      for (int j = 0; j < A; ++j) {                                                          \
        float4 s = 0.0f;                                                                     \
        for (int k = 0; k < A; ++k) s += AT[i][k] * x[k][j];                                 \
        t[i][j] = s;                                                                         \
      }                                                                                      \
    float4 b = has_bias ? READ(bias, ob, 0) : (float4)(0.0f);                                \
    for (int i = 0; i < A - 2; ++i)                                                          \
      for (int j = 0; j < A - 2; ++j) {                                                      \
        int h = h0 + i, w = w0 + j;                                                          \
        if (h >= out_h || w >= out_w) continue;                                              \
        float4 s = b;                                                                        \
        for (int k = 0; k < A; ++k) s += t[i][k] * AT[j][k];                                 \
        WRITE(output, ob * out_w + w, n * out_h + h,                                         \
              tail_zero(activate(s, act, alpha, limit), ob, out_c));                         \
      }                                                                                      \
  }

WINO_OUTPUT(winograd_output_2, 4, AT2)
WINO_OUTPUT(winograd_output_4, 6, AT4)
