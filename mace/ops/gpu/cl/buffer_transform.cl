// Buffer <-> image transforms for every layout of docs/gpu.md (MACE's "Memory layout" tables).
// Buffers are dense row-major float arrays; each work item moves one pixel (4 values),
// lanes past the tensor's end are written as 0 (see common.cl).

// ---- channel-major input/output: NHWC -> [W * (C+3)/4, N * H] ----------------------------
// P[x, y] = {E[n, h, w, c] | n = y / H, h = y % H, w = x % W, c = x / W * 4 + k}
__kernel void nhwc_to_image(__global const float *buf, __write_only image2d_t img,
                            int N, int H, int W, int C) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x >= W * ((C + 3) / 4) || y >= N * H) return;
  int w = x % W, cb = x / W;
  int base = (y * W + w) * C + cb * 4;  // y * W + w == (n * H + h) * W + w
  float v[4];
  for (int k = 0; k < 4; ++k) v[k] = cb * 4 + k < C ? buf[base + k] : 0.0f;
  WRITE_UNCOUNTED(img, x, y, (float4)(v[0], v[1], v[2], v[3]));
}

__kernel void image_to_nhwc(__read_only image2d_t img, __global float *buf,
                            int N, int H, int W, int C) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x >= W * ((C + 3) / 4) || y >= N * H) return;
  int w = x % W, cb = x / W;
  int base = (y * W + w) * C + cb * 4;
  float4 p = READ(img, x, y);
  for (int k = 0; k < 4 && cb * 4 + k < C; ++k) buf[base + k] = lane(p, k);
}

// ---- height-major: NHWC -> [W * C, N * (H+3)/4] ------------------------------------------
// P[x, y] = {E[n, h, w, c] | n = y / HB, h = y % HB * 4 + k, w = x % W, c = x / W}, HB = (H+3)/4
__kernel void nhwc_to_image_hm(__global const float *buf, __write_only image2d_t img,
                               int N, int H, int W, int C) {
  int x = get_global_id(0), y = get_global_id(1);
  int hb_count = (H + 3) / 4;
  if (x >= W * C || y >= N * hb_count) return;
  int w = x % W, c = x / W, n = y / hb_count, h0 = y % hb_count * 4;
  float v[4];
  for (int k = 0; k < 4; ++k)
    v[k] = h0 + k < H ? buf[((n * H + h0 + k) * W + w) * C + c] : 0.0f;
  WRITE_UNCOUNTED(img, x, y, (float4)(v[0], v[1], v[2], v[3]));
}

__kernel void image_hm_to_nhwc(__read_only image2d_t img, __global float *buf,
                               int N, int H, int W, int C) {
  int x = get_global_id(0), y = get_global_id(1);
  int hb_count = (H + 3) / 4;
  if (x >= W * C || y >= N * hb_count) return;
  int w = x % W, c = x / W, n = y / hb_count, h0 = y % hb_count * 4;
  float4 p = READ(img, x, y);
  for (int k = 0; k < 4 && h0 + k < H; ++k) buf[((n * H + h0 + k) * W + w) * C + c] = lane(p, k);
}

// ---- convolution filter: OIHW -> [I, (O+3)/4 * H * W] ------------------------------------
// P[m, n] = {E[o, i, h, w] | o = n / HW * 4 + k, i = m, h = T / W, w = T % W}, T = n % HW
__kernel void filter_to_image(__global const float *buf, __write_only image2d_t img,
                              int O, int I, int H, int W) {
  int m = get_global_id(0), n = get_global_id(1);
  int hw = H * W;
  if (m >= I || n >= (O + 3) / 4 * hw) return;
  int o0 = n / hw * 4, t = n % hw;
  float v[4];
  for (int k = 0; k < 4; ++k) v[k] = o0 + k < O ? buf[((o0 + k) * I + m) * hw + t] : 0.0f;
  WRITE_UNCOUNTED(img, m, n, (float4)(v[0], v[1], v[2], v[3]));
}

__kernel void image_to_filter(__read_only image2d_t img, __global float *buf,
                              int O, int I, int H, int W) {
  int m = get_global_id(0), n = get_global_id(1);
  int hw = H * W;
  if (m >= I || n >= (O + 3) / 4 * hw) return;
  int o0 = n / hw * 4, t = n % hw;
  float4 p = READ(img, m, n);
  for (int k = 0; k < 4 && o0 + k < O; ++k) buf[((o0 + k) * I + m) * hw + t] = lane(p, k);
}

// ---- depthwise filter: MIHW -> [H * W * M, (I+3)/4] --------------------------------------
// P[m, n] = {E[mm, i, h, w] | mm = m / HW, i = n * 4 + k, h = m % HW / W, w = m % W}
// (MACE documents M == 1, which is what the depthwise kernel uses.)
__kernel void dw_filter_to_image(__global const float *buf, __write_only image2d_t img,
                                 int M, int I, int H, int W) {
  int m = get_global_id(0), n = get_global_id(1);
  int hw = H * W;
  if (m >= hw * M || n >= (I + 3) / 4) return;
  int mm = m / hw, t = m % hw;
  float v[4];
  for (int k = 0; k < 4; ++k) v[k] = n * 4 + k < I ? buf[(mm * I + n * 4 + k) * hw + t] : 0.0f;
  WRITE_UNCOUNTED(img, m, n, (float4)(v[0], v[1], v[2], v[3]));
}

__kernel void image_to_dw_filter(__read_only image2d_t img, __global float *buf,
                                 int M, int I, int H, int W) {
  int m = get_global_id(0), n = get_global_id(1);
  int hw = H * W;
  if (m >= hw * M || n >= (I + 3) / 4) return;
  int mm = m / hw, t = m % hw;
  float4 p = READ(img, m, n);
  for (int k = 0; k < 4 && n * 4 + k < I; ++k) buf[(mm * I + n * 4 + k) * hw + t] = lane(p, k);
}

// ---- 1-D argument: W -> [(W+3)/4, 1] ------------------------------------------------------
// P[i, 0] = {E[w] | w = i * 4 + k}
__kernel void arg_to_image(__global const float *buf, __write_only image2d_t img, int W) {
  int i = get_global_id(0);
  if (i >= (W + 3) / 4) return;
  float v[4];
  for (int k = 0; k < 4; ++k) v[k] = i * 4 + k < W ? buf[i * 4 + k] : 0.0f;
  WRITE_UNCOUNTED(img, i, 0, (float4)(v[0], v[1], v[2], v[3]));
}

__kernel void image_to_arg(__read_only image2d_t img, __global float *buf, int W) {
  int i = get_global_id(0);
  if (i >= (W + 3) / 4) return;
  float4 p = READ(img, i, 0);
  for (int k = 0; k < 4 && i * 4 + k < W; ++k) buf[i * 4 + k] = lane(p, k);
}
