// Element-wise ops on channel-major images: binary Eltwise with broadcasting, unary
// Eltwise, Activation (PReLU included) and BatchNorm. gws = [W * (C+3)/4, N * H]: one pixel.

// How an operand is read. 0: the output's own shape; 1: one value per channel (a 1-D
// argument image); 2: a scalar; 3: one value per (n, channel): an (N, 1, 1, C) image.
inline float4 operand(__read_only image2d_t img, int mode, float scalar, int x, int y, int W,
                      int H) {
  if (mode == 0) return READ(img, x, y);
  if (mode == 1) return READ(img, x / W, 0);
  if (mode == 2) return (float4)(scalar);
  return READ(img, x / W, y / H);
}

#define ELT_SUM 0
#define ELT_SUB 1
#define ELT_PROD 2
#define ELT_DIV 3
#define ELT_MIN 4
#define ELT_MAX 5
#define ELT_SQR_DIFF 6
#define ELT_POW 7
#define ELT_MEAN 8

__kernel void eltwise(__read_only image2d_t a, __read_only image2d_t b, __write_only image2d_t out,
                      int width, int height, int W, int H, int channels, int mode_a, int mode_b,
                      float scalar_a, float scalar_b, int kind, int act, float alpha, float limit RANGE_ARG) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x >= width || y >= height) return;
  float4 u = operand(a, mode_a, scalar_a, x, y, W, H), v = operand(b, mode_b, scalar_b, x, y, W, H);
  float4 r;
  switch (kind) {
    case ELT_SUM: r = u + v; break;
    case ELT_SUB: r = u - v; break;
    case ELT_PROD: r = u * v; break;
    case ELT_DIV: r = u / v; break;
    case ELT_MIN: r = fmin(u, v); break;
    case ELT_MAX: r = fmax(u, v); break;
    case ELT_SQR_DIFF: r = (u - v) * (u - v); break;
    case ELT_POW: r = pow(u, v); break;
    default: r = (u + v) * 0.5f; break;
  }
  WRITE(out, x, y, tail_zero(activate(r, act, alpha, limit), x / W, channels));
}

#define UN_NEG 0
#define UN_ABS 1
#define UN_SQRT 2
#define UN_RSQRT 3
#define UN_EXP 4
#define UN_LOG 5
#define UN_RECIPROCAL 6
#define UN_SQUARE 7
#define UN_FLOOR 8
#define UN_CEIL 9
#define UN_ROUND 10
#define UN_SIGN 11
#define UN_SIN 12
#define UN_COS 13
#define UN_ERF 14

__kernel void eltwise_unary(__read_only image2d_t a, __write_only image2d_t out, int width,
                            int height, int W, int channels, int kind, int act, float alpha,
                            float limit RANGE_ARG) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x >= width || y >= height) return;
  float4 u = READ(a, x, y), r;
  switch (kind) {
    case UN_NEG: r = -u; break;
    case UN_ABS: r = fabs(u); break;
    case UN_SQRT: r = sqrt(u); break;
    case UN_RSQRT: r = rsqrt(u); break;
    case UN_EXP: r = exp(u); break;
    case UN_LOG: r = log(u); break;
    case UN_RECIPROCAL: r = 1.0f / u; break;
    case UN_SQUARE: r = u * u; break;
    case UN_FLOOR: r = floor(u); break;
    case UN_CEIL: r = ceil(u); break;
    case UN_ROUND: r = rint(u); break;
    case UN_SIGN: r = sign(u); break;
    case UN_SIN: r = sin(u); break;
    case UN_COS: r = cos(u); break;
    default: r = erf(u); break;
  }
  WRITE(out, x, y, tail_zero(activate(r, act, alpha, limit), x / W, channels));
}

// Activation op; prelu_mode != -1 reads the PReLU slope as an operand (see `operand`).
__kernel void activation(__read_only image2d_t a, __read_only image2d_t slope,
                         __write_only image2d_t out, int width, int height, int W, int H,
                         int channels, int act, float alpha, float limit, int prelu_mode,
                         float slope_scalar RANGE_ARG) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x >= width || y >= height) return;
  float4 u = READ(a, x, y), r;
  if (prelu_mode >= 0) {
    float4 s = operand(slope, prelu_mode, slope_scalar, x, y, W, H);
    r = select(u * s, u, u >= 0.0f);
  } else {
    r = activate(u, act, alpha, limit);
  }
  WRITE(out, x, y, tail_zero(r, x / W, channels));
}

// y = x * scale + offset per channel, then the fused activation.
__kernel void batch_norm(__read_only image2d_t a, __read_only image2d_t scale,
                         __read_only image2d_t offset, __write_only image2d_t out, int width,
                         int height, int W, int channels, int act, float alpha, float limit RANGE_ARG) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x >= width || y >= height) return;
  int cb = x / W;
  float4 r = READ(a, x, y) * READ(scale, cb, 0) + READ(offset, cb, 0);
  WRITE(out, x, y, tail_zero(activate(r, act, alpha, limit), cb, channels));
}

// FakeQuantize (mace/ops/fake_quantize.py): x on a quantization grid and back, the
// rounding and saturation of an ONNX QuantizeLinear -> DequantizeLinear pair.
__kernel void fake_quantize(__read_only image2d_t a, __write_only image2d_t out, int width,
                            int height, int W, int channels, float scale, float zero, float qmin,
                            float qmax RANGE_ARG) {
  int x = get_global_id(0), y = get_global_id(1);
  if (x >= width || y >= height) return;
  float4 q = clamp(rint(READ(a, x, y) / scale) + zero, qmin, qmax);
  WRITE(out, x, y, tail_zero((q - zero) * scale, x / W, channels));
}
