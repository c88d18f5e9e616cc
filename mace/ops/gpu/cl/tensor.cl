// Data movement and normalisation on channel-major images: concat on channels, softmax
// over channels, resize, pad, space/depth, and a flat-index gather (reshape, transpose).

// Up to four inputs joined on the channel axis (more are chained by the host).
// gws = [W * (C+3)/4, N * H]; c0..c3: each input's channels (0: absent).
__kernel void concat(__read_only image2d_t in0, __read_only image2d_t in1, __read_only image2d_t in2,
                     __read_only image2d_t in3, __write_only image2d_t out, int W, int height,
                     int c0, int c1, int c2, int c3 RANGE_ARG) {
  int x = get_global_id(0), y = get_global_id(1);
  int total = c0 + c1 + c2 + c3;
  if (x >= W * ((total + 3) / 4) || y >= height) return;
  int cb = x / W, w = x % W;
  float v[4];
  for (int k = 0; k < 4; ++k) {
    int c = cb * 4 + k;
    if (c >= total) { v[k] = 0.0f; continue; }
    if (c < c0) { v[k] = lane(READ(in0, (c >> 2) * W + w, y), c & 3); continue; }
    c -= c0;
    if (c < c1) { v[k] = lane(READ(in1, (c >> 2) * W + w, y), c & 3); continue; }
    c -= c1;
    if (c < c2) { v[k] = lane(READ(in2, (c >> 2) * W + w, y), c & 3); continue; }
    c -= c2;
    v[k] = lane(READ(in3, (c >> 2) * W + w, y), c & 3);
  }
  WRITE(out, x, y, (float4)(v[0], v[1], v[2], v[3]));
}

// Softmax (or log-softmax) over the channels of one (n, h, w). gws = [W, N * H]
__kernel void softmax(__read_only image2d_t input, __write_only image2d_t out, int W, int height,
                      int channels, int use_log RANGE_ARG) {
  int w = get_global_id(0), y = get_global_id(1);
  if (w >= W || y >= height) return;
  int blocks = (channels + 3) / 4;
  float m = -INFINITY;
  for (int cb = 0; cb < blocks; ++cb) {
    float4 v = READ(input, cb * W + w, y);
    for (int k = 0; k < 4 && cb * 4 + k < channels; ++k) m = fmax(m, lane(v, k));
  }
  float sum = 0.0f;
  for (int cb = 0; cb < blocks; ++cb) {
    float4 v = READ(input, cb * W + w, y);
    for (int k = 0; k < 4 && cb * 4 + k < channels; ++k) sum += exp(lane(v, k) - m);
  }
  float log_sum = log(sum);
  for (int cb = 0; cb < blocks; ++cb) {
    float4 v = READ(input, cb * W + w, y) - m;
    float4 r = use_log ? v - log_sum : exp(v) / sum;
    WRITE(out, cb * W + w, y, tail_zero(r, cb, channels));
  }
}

// Resize with per-axis tables computed on the host (the CPU kernel's, so picks match):
// bilinear: lo/hi source index and the hi weight per output row and column.
// gws = [out_w * (C+3)/4, N * out_h]
__kernel void resize_bilinear(__read_only image2d_t input, __write_only image2d_t out,
                              __global const int *row_lo, __global const int *row_hi,
                              __global const float *row_w, __global const int *col_lo,
                              __global const int *col_hi, __global const float *col_w, int in_h,
                              int in_w, int out_h, int out_w, int nh_total, int blocks RANGE_ARG) {
  int x = get_global_id(0), y = get_global_id(1);
  if (y >= nh_total || x >= out_w * blocks) return;
  int cb = x / out_w, ow = x % out_w, n = y / out_h, oh = y % out_h;
  int r0 = n * in_h + row_lo[oh], r1 = n * in_h + row_hi[oh];
  int c0 = cb * in_w + col_lo[ow], c1 = cb * in_w + col_hi[ow];
  float wr = row_w[oh], wc = col_w[ow];
  float4 top = READ(input, c0, r0) * (1.0f - wc) + READ(input, c1, r0) * wc;
  float4 bottom = READ(input, c0, r1) * (1.0f - wc) + READ(input, c1, r1) * wc;
  WRITE(out, x, y, top * (1.0f - wr) + bottom * wr);
}

__kernel void resize_nearest(__read_only image2d_t input, __write_only image2d_t out,
                             __global const int *rows, __global const int *cols, int in_h, int in_w,
                             int out_h, int out_w, int nh_total, int blocks RANGE_ARG) {
  int x = get_global_id(0), y = get_global_id(1);
  if (y >= nh_total || x >= out_w * blocks) return;
  int cb = x / out_w, ow = x % out_w, n = y / out_h, oh = y % out_h;
  WRITE(out, x, y, READ(input, cb * in_w + cols[ow], n * in_h + rows[oh]));
}

// Source index along one axis for Pad; -1: a constant cell. mode: 0 constant, 1 reflect,
// 2 symmetric, 3 edge, 4 wrap (non-constant modes need non-negative pads).
inline int pad_source(int o, int begin, int size, int mode) {
  int i = o - begin;
  if (i >= 0 && i < size) return i;
  if (mode == 0) return -1;
  if (mode == 3) return clamp(i, 0, size - 1);
  if (mode == 4) return ((i % size) + size) % size;
  if (mode == 1) {
    if (size == 1) return 0;
    int p = 2 * (size - 1);
    i = ((i % p) + p) % p;
    return i < size ? i : p - i;
  }
  int p = 2 * size;
  i = ((i % p) + p) % p;
  return i < size ? i : p - 1 - i;
}

// gws = [out_w * (out_c+3)/4, out_n * out_h]; dims are NHWC views, begin_* the leading pads
__kernel void pad(__read_only image2d_t input, __write_only image2d_t out, int in_n, int in_h,
                  int in_w, int in_c, int out_n, int out_h, int out_w, int out_c, int begin_n,
                  int begin_h, int begin_w, int begin_c, int mode, float value RANGE_ARG) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x >= out_w * ((out_c + 3) / 4) || y >= out_n * out_h) return;
  int cb = x / out_w, ow = x % out_w, n = y / out_h, oh = y % out_h;
  int sn = pad_source(n, begin_n, in_n, mode), sh = pad_source(oh, begin_h, in_h, mode);
  int sw = pad_source(ow, begin_w, in_w, mode);
  float v[4];
  for (int k = 0; k < 4; ++k) {
    int c = cb * 4 + k, sc = pad_source(c, begin_c, in_c, mode);
    if (c >= out_c) v[k] = 0.0f;
    else if (sn < 0 || sh < 0 || sw < 0 || sc < 0) v[k] = value;
    else v[k] = read_element(input, sn, sh, sw, sc, in_h, in_w);
  }
  WRITE(out, x, y, (float4)(v[0], v[1], v[2], v[3]));
}

// SpaceToDepth / DepthToSpace (NHWC, DCR or CRD channel order as ONNX defines them).
// gws = [out_w * (out_c+3)/4, N * out_h]
__kernel void space_depth(__read_only image2d_t input, __write_only image2d_t out, int in_h,
                          int in_w, int in_c, int out_h, int out_w, int out_c, int nh_total,
                          int block, int crd, int to_space RANGE_ARG) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x >= out_w * ((out_c + 3) / 4) || y >= nh_total) return;
  int cb = x / out_w, ow = x % out_w, n = y / out_h, oh = y % out_h;
  float v[4];
  for (int k = 0; k < 4; ++k) {
    int c = cb * 4 + k, ih, iw, ic;
    if (c >= out_c) { v[k] = 0.0f; continue; }
    if (to_space) {      // out[n, h*b+i, w*b+j, c] from in[n, h, w, channel(i, j, c)]
      int i = oh % block, j = ow % block;
      ih = oh / block; iw = ow / block;
      ic = crd ? c * block * block + i * block + j : (i * block + j) * out_c + c;
    } else {             // out[n, h, w, channel(i, j, c)] from in[n, h*b+i, w*b+j, c]
      int i, j;
      if (crd) { ic = c / (block * block); i = c / block % block; j = c % block; }
      else { ic = c % in_c; i = c / in_c / block; j = c / in_c % block; }
      ih = oh * block + i; iw = ow * block + j;
    }
    v[k] = read_element(input, n, ih, iw, ic, in_h, in_w);
  }
  WRITE(out, x, y, (float4)(v[0], v[1], v[2], v[3]));
}

// Reshape and Transpose: output element -> logical index -> input element. The logical
// shape (padded to 4 with leading 1s) and each axis's input stride are given; the NHWC
// views of input and output keep row-major order (see images.py).
// gws = [out_w * (out_c+3)/4, out_n * out_h]
__kernel void gather_permute(__read_only image2d_t input, __write_only image2d_t out, int in_h,
                             int in_w, int in_c, int out_n, int out_h, int out_w, int out_c,
                             int d0, int d1, int d2, int d3, int s0, int s1, int s2, int s3 RANGE_ARG) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x >= out_w * ((out_c + 3) / 4) || y >= out_n * out_h) return;
  int cb = x / out_w, ow = x % out_w;
  float v[4];
  for (int k = 0; k < 4; ++k) {
    int c = cb * 4 + k;
    if (c >= out_c) { v[k] = 0.0f; continue; }
    int flat = (y * out_w + ow) * out_c + c;   // y = n * out_h + h
    int i3 = flat % d3, r = flat / d3;
    int i2 = r % d2; r /= d2;
    int i1 = r % d1, i0 = r / d1;
    int src = i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3;
    int ic = src % in_c; r = src / in_c;
    int iw = r % in_w; r /= in_w;
    v[k] = read_element(input, r / in_h, r % in_h, iw, ic, in_h, in_w);
  }
  WRITE(out, x, y, (float4)(v[0], v[1], v[2], v[3]));
}
