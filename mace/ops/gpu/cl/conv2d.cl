// Convolutions on channel-major images: Conv2D (general, 3x3, 1x1), depthwise, deconv.
// Filters use the conv filter layout [I, (O+3)/4 * kh * kw] (pixel (i, ob * kh*kw + tap)
// holds output channels ob*4..ob*4+3 of input channel i) or, for depthwise, the
// depthwise layout [kh * kw, (C+3)/4]. Biases are 1-D argument images.

// One work item: 4 output channels x 4 output columns at one (n, oh).
// gws = [(out_c+3)/4, (out_w+3)/4, N * out_h]
inline void conv2d_block(__read_only image2d_t input, __read_only image2d_t filter,
                         __read_only image2d_t bias, __write_only image2d_t output,
                         int in_h, int in_w, int in_c, int out_h, int out_w, int out_c, int nh_total,
                         int k_h, int k_w, int s_h, int s_w, int d_h, int d_w, int pad_t, int pad_l,
                         int has_bias, int act, float alpha, float limit RANGE_ARG) {
  int ob = get_global_id(0), wb = get_global_id(1), nh = get_global_id(2);
  if (ob >= (out_c + 3) / 4 || wb * 4 >= out_w || nh >= nh_total) return;
  int n = nh / out_h, oh = nh % out_h, ow0 = wb * 4;
  float4 b = has_bias ? READ(bias, ob, 0) : (float4)(0.0f);
  float4 acc0 = b, acc1 = b, acc2 = b, acc3 = b;
  int in_cb = (in_c + 3) / 4, taps = k_h * k_w;
  for (int i = 0; i < k_h; ++i) {
    int ih = oh * s_h - pad_t + i * d_h;
    if (ih < 0 || ih >= in_h) continue;
    int y = n * in_h + ih;
    for (int j = 0; j < k_w; ++j) {
      int iw0 = ow0 * s_w - pad_l + j * d_w;
      int iw1 = iw0 + s_w, iw2 = iw1 + s_w, iw3 = iw2 + s_w;
      // a column outside the input reads x = -1: the sampler's border, i.e. zeros
      int x0 = iw0 >= 0 && iw0 < in_w ? iw0 : -1 - in_w * in_cb;
      int x1 = iw1 >= 0 && iw1 < in_w ? iw1 : -1 - in_w * in_cb;
      int x2 = iw2 >= 0 && iw2 < in_w ? iw2 : -1 - in_w * in_cb;
      int x3 = iw3 >= 0 && iw3 < in_w ? iw3 : -1 - in_w * in_cb;
      int fy = ob * taps + i * k_w + j;
      for (int cb = 0; cb < in_cb; ++cb) {
        int c = cb * 4, xb = cb * in_w;
        float4 f0 = READ(filter, c, fy), f1 = READ(filter, c + 1, fy);
        float4 f2 = READ(filter, c + 2, fy), f3 = READ(filter, c + 3, fy);
        float4 v0 = READ(input, xb + x0, y), v1 = READ(input, xb + x1, y);
        float4 v2 = READ(input, xb + x2, y), v3 = READ(input, xb + x3, y);
        acc0 += v0.x * f0 + v0.y * f1 + v0.z * f2 + v0.w * f3;
        acc1 += v1.x * f0 + v1.y * f1 + v1.z * f2 + v1.w * f3;
        acc2 += v2.x * f0 + v2.y * f1 + v2.z * f2 + v2.w * f3;
        acc3 += v3.x * f0 + v3.y * f1 + v3.z * f2 + v3.w * f3;
      }
    }
  }
  int x = ob * out_w + ow0;
  WRITE(output, x, nh, tail_zero(activate(acc0, act, alpha, limit), ob, out_c));
  if (ow0 + 1 < out_w) WRITE(output, x + 1, nh, tail_zero(activate(acc1, act, alpha, limit), ob, out_c));
  if (ow0 + 2 < out_w) WRITE(output, x + 2, nh, tail_zero(activate(acc2, act, alpha, limit), ob, out_c));
  if (ow0 + 3 < out_w) WRITE(output, x + 3, nh, tail_zero(activate(acc3, act, alpha, limit), ob, out_c));
}

#define CONV_ARGS                                                                          \
  __read_only image2d_t input, __read_only image2d_t filter, __read_only image2d_t bias,   \
      __write_only image2d_t output, int in_h, int in_w, int in_c, int out_h, int out_w,   \
      int out_c, int nh_total, int k_h, int k_w, int s_h, int s_w, int d_h, int d_w,       \
      int pad_t, int pad_l, int has_bias, int act, float alpha, float limit

__kernel void conv2d(CONV_ARGS RANGE_ARG) {
  conv2d_block(input, filter, bias, output, in_h, in_w, in_c, out_h, out_w, out_c, nh_total, k_h,
               k_w, s_h, s_w, d_h, d_w, pad_t, pad_l, has_bias, act, alpha, limit RANGE_PASS);
}

// The same body with the window size known to the compiler (loops unrolled).
__kernel void conv2d_3x3(CONV_ARGS RANGE_ARG) {
  conv2d_block(input, filter, bias, output, in_h, in_w, in_c, out_h, out_w, out_c, nh_total, 3, 3,
               s_h, s_w, d_h, d_w, pad_t, pad_l, has_bias, act, alpha, limit RANGE_PASS);
}

__kernel void conv2d_1x1(CONV_ARGS RANGE_ARG) {
  conv2d_block(input, filter, bias, output, in_h, in_w, in_c, out_h, out_w, out_c, nh_total, 1, 1,
               s_h, s_w, 1, 1, pad_t, pad_l, has_bias, act, alpha, limit RANGE_PASS);
}

// Depthwise (channel multiplier 1): one pixel of 4 channels per work item.
// gws = [(C+3)/4, out_w, N * out_h]
__kernel void depthwise_conv2d(CONV_ARGS RANGE_ARG) {
  int cb = get_global_id(0), ow = get_global_id(1), nh = get_global_id(2);
  if (cb >= (out_c + 3) / 4 || ow >= out_w || nh >= nh_total) return;
  int n = nh / out_h, oh = nh % out_h;
  float4 acc = has_bias ? READ(bias, cb, 0) : (float4)(0.0f);
  for (int i = 0; i < k_h; ++i) {
    int ih = oh * s_h - pad_t + i * d_h;
    if (ih < 0 || ih >= in_h) continue;
    for (int j = 0; j < k_w; ++j) {
      int iw = ow * s_w - pad_l + j * d_w;
      if (iw < 0 || iw >= in_w) continue;
      acc += READ(input, cb * in_w + iw, n * in_h + ih) * READ(filter, i * k_w + j, cb);
    }
  }
  WRITE(output, cb * out_w + ow, nh, tail_zero(activate(acc, act, alpha, limit), cb, out_c));
}

// Transposed convolution: output cell (oh, ow) gathers every input cell whose taps land
// on it. pad_t / pad_l are the cells cropped from the full result (may be negative).
// gws = [(out_c+3)/4, out_w, N * out_h]; filter: conv layout of the OIHW view (O = C_out).
__kernel void deconv2d(CONV_ARGS RANGE_ARG) {
  int ob = get_global_id(0), ow = get_global_id(1), nh = get_global_id(2);
  if (ob >= (out_c + 3) / 4 || ow >= out_w || nh >= nh_total) return;
  int n = nh / out_h, oh = nh % out_h;
  float4 acc = has_bias ? READ(bias, ob, 0) : (float4)(0.0f);
  int in_cb = (in_c + 3) / 4, taps = k_h * k_w;
  int fh = oh + pad_t, fw = ow + pad_l;
  for (int i = 0; i < k_h; ++i) {
    int th = fh - i * d_h;
    if (th < 0 || th % s_h) continue;
    int ih = th / s_h;
    if (ih >= in_h) continue;
    for (int j = 0; j < k_w; ++j) {
      int tw = fw - j * d_w;
      if (tw < 0 || tw % s_w) continue;
      int iw = tw / s_w;
      if (iw >= in_w) continue;
      int fy = ob * taps + i * k_w + j, y = n * in_h + ih;
      for (int cb = 0; cb < in_cb; ++cb) {
        int c = cb * 4;
        float4 v = READ(input, cb * in_w + iw, y);
        acc += v.x * READ(filter, c, fy) + v.y * READ(filter, c + 1, fy) +
               v.z * READ(filter, c + 2, fy) + v.w * READ(filter, c + 3, fy);
      }
    }
  }
  WRITE(output, ob * out_w + ow, nh, tail_zero(activate(acc, act, alpha, limit), ob, out_c));
}
