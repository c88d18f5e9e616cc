// Pooling (max / average) and reductions over H, W on channel-major images.

// gws = [(C+3)/4, out_w, N * out_h]. Average: cells inside the input count; with
// count_include_pad also pad cells inside [0, count_h) x [0, count_w) of the padded grid.
__kernel void pooling(__read_only image2d_t input, __write_only image2d_t output, int in_h,
                      int in_w, int channels, int out_h, int out_w, int nh_total, int k_h, int k_w,
                      int s_h, int s_w, int d_h, int d_w, int pad_t, int pad_l, int is_max,
                      int include_pad, int count_h, int count_w RANGE_ARG) {
  int cb = get_global_id(0), ow = get_global_id(1), nh = get_global_id(2);
  if (cb >= (channels + 3) / 4 || ow >= out_w || nh >= nh_total) return;
  int n = nh / out_h, oh = nh % out_h;
  float4 acc = is_max ? (float4)(-INFINITY) : (float4)(0.0f);
  int count = 0;
  for (int i = 0; i < k_h; ++i) {
    int ph = oh * s_h + i * d_h, ih = ph - pad_t;   // row in the padded grid and in the input
    for (int j = 0; j < k_w; ++j) {
      int pw = ow * s_w + j * d_w, iw = pw - pad_l;
      if (ih >= 0 && ih < in_h && iw >= 0 && iw < in_w) {
        float4 v = READ(input, cb * in_w + iw, n * in_h + ih);
        acc = is_max ? fmax(acc, v) : acc + v;
        ++count;
      } else if (include_pad && ph < count_h && pw < count_w) {
        ++count;
      }
    }
  }
  if (!is_max) acc /= (float)max(count, 1);
  WRITE(output, cb * out_w + ow, nh, tail_zero(acc, cb, channels));
}

// Reduce over H and W: output (N, 1, 1, C) or (N, C), the same image. gws = [(C+3)/4, N]
// kind: 0 mean, 1 sum, 2 max, 3 min
__kernel void reduce_hw(__read_only image2d_t input, __write_only image2d_t output, int in_h,
                        int in_w, int channels, int batch, int kind RANGE_ARG) {
  int cb = get_global_id(0), n = get_global_id(1);
  if (cb >= (channels + 3) / 4 || n >= batch) return;
  float4 acc = kind == 2 ? (float4)(-INFINITY) : kind == 3 ? (float4)(INFINITY) : (float4)(0.0f);
  for (int h = 0; h < in_h; ++h)
    for (int w = 0; w < in_w; ++w) {
      float4 v = READ(input, cb * in_w + w, n * in_h + h);
      acc = kind == 2 ? fmax(acc, v) : kind == 3 ? fmin(acc, v) : acc + v;
    }
  if (kind == 0) acc /= (float)(in_h * in_w);
  WRITE(output, cb, n, tail_zero(acc, cb, channels));
}
