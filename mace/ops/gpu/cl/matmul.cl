// MatMul on channel-major images: y[b, m, n] = sum_k A[b, m, k] B[b, k, n].
// An operand of rank >= 3 is stored as NHWC (batch..., rows, cols): element (b, r, c) at
// pixel (c/4 * rows + r, b). A 2-D operand (rows, cols) is NHWC (rows, 1, 1, cols): pixel
// (c/4, r), shared by every batch. transpose_a / transpose_b swap rows and columns.

inline float4 pixel(__read_only image2d_t img, int flat, int rows, int b, int r, int cb) {
  return flat ? READ(img, cb, r) : READ(img, cb * rows + r, b);
}

inline float element(__read_only image2d_t img, int flat, int rows, int cols, int b, int r, int c) {
  if (r >= rows || c >= cols) return 0.0f;
  return lane(pixel(img, flat, rows, b, r, c >> 2), c & 3);
}

// gws = [(N+3)/4, M, batch]
__kernel void matmul(__read_only image2d_t a, __read_only image2d_t bm, __write_only image2d_t out,
                     int M, int N, int K, int batch, int ta, int tb, int a_flat, int b_flat,
                     int out_flat RANGE_ARG) {
  int nb = get_global_id(0), m = get_global_id(1), bt = get_global_id(2);
  if (nb * 4 >= N || m >= M || bt >= batch) return;
  int n0 = nb * 4;
  float4 acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += 4) {
    float4 av;   // A[m, k0..k0+3]
    if (!ta) {
      av = pixel(a, a_flat, M, bt, m, k0 >> 2);
    } else {     // stored (K, M)
      av = (float4)(element(a, a_flat, K, M, bt, k0, m), element(a, a_flat, K, M, bt, k0 + 1, m),
                    element(a, a_flat, K, M, bt, k0 + 2, m), element(a, a_flat, K, M, bt, k0 + 3, m));
    }
    if (!tb) {   // stored (K, N): row k holds 4 outputs' weights in one pixel
      for (int j = 0; j < 4 && k0 + j < K; ++j)
        acc += lane(av, j) * pixel(bm, b_flat, K, bt, k0 + j, nb);
    } else {     // stored (N, K): pixel (k0/4, n) holds 4 k values of output n
      float4 g0 = n0 < N ? pixel(bm, b_flat, N, bt, n0, k0 >> 2) : (float4)(0.0f);
      float4 g1 = n0 + 1 < N ? pixel(bm, b_flat, N, bt, n0 + 1, k0 >> 2) : (float4)(0.0f);
      float4 g2 = n0 + 2 < N ? pixel(bm, b_flat, N, bt, n0 + 2, k0 >> 2) : (float4)(0.0f);
      float4 g3 = n0 + 3 < N ? pixel(bm, b_flat, N, bt, n0 + 3, k0 >> 2) : (float4)(0.0f);
      acc += (float4)(dot(av, g0), dot(av, g1), dot(av, g2), dot(av, g3));
    }
  }
  int x = out_flat ? nb : nb * M + m, y = out_flat ? m : bt;
  WRITE(out, x, y, tail_zero(acc, nb, N));
}
