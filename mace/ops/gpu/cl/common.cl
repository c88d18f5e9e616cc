// Shared by every kernel file (prepended at build time): sampler, pixel access,
// tail masking and the fused activations.
//
// Tensors live in CL_RGBA images, 4 values a pixel (docs/gpu.md). Storage is half
// (fp16_fp32) or float (fp32_fp32); kernels always compute in float: read_imagef and
// write_imagef convert, so one source serves both and only build options differ.
//
// Invariant every kernel keeps: it writes every pixel of its output's logical region,
// with the lanes past the last channel set to 0. Readers may therefore multiply whole
// pixels without masking, and reused (larger) images never leak stale values.

__constant sampler_t SAMPLER = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;

#define READ(img, x, y) read_imagef(img, SAMPLER, (int2)((x), (y)))

#if FP16_STORAGE
// Half overflows to inf at 65504; clamping keeps one large value from turning into NaN later.
#define STORE_RANGE(v) clamp((v), -65504.0f, 65504.0f)
#else
#define STORE_RANGE(v) (v)
#endif

#if RANGE_CHECK
// The counting variant (docs/gpu.md "fp16 range check"), compiled in when asked: every kernel
// that stores an op's output takes one more argument, the node's counter slot, and each store
// counts what half storage does to its values before it does it. Atomics only run for
// a pixel with something to count, so a healthy model pays a few compares per store.
#define RANGE_ARG , __global int *range_counts
#define RANGE_PASS , range_counts
#define RANGE_NONFINITE 0   // NaN or Inf
#define RANGE_CLAMPED 1     // |v| > 65504: clamped (fp16 storage)
#define RANGE_SUBNORMAL 2   // 2^-25 <= |v| < 2^-14: half subnormal, under 11 significant bits
#define RANGE_FLUSHED 3     // 0 < |v| < 2^-25: rounds to zero in half

inline float4 counted_store(float4 v, __global int *counts) {
  float4 a = fabs(v);
  int4 bad = isnan(v) || isinf(v);
  int nonfinite = -(bad.x + bad.y + bad.z + bad.w);
  if (nonfinite) atomic_add(&counts[RANGE_NONFINITE], nonfinite);
#if FP16_STORAGE
  int4 big = !bad && a > 65504.0f;
  int4 sub = a >= 2.98023224e-8f && a < 6.10351562e-5f;
  int4 flush = a > 0.0f && a < 2.98023224e-8f;
  int clamped = -(big.x + big.y + big.z + big.w);
  int subnormal = -(sub.x + sub.y + sub.z + sub.w);
  int flushed = -(flush.x + flush.y + flush.z + flush.w);
  if (clamped) atomic_add(&counts[RANGE_CLAMPED], clamped);
  if (subnormal) atomic_add(&counts[RANGE_SUBNORMAL], subnormal);
  if (flushed) atomic_add(&counts[RANGE_FLUSHED], flushed);
#endif
  return STORE_RANGE(v);
}
#define WRITE(img, x, y, v) write_imagef(img, (int2)((x), (y)), counted_store((v), range_counts))
#else
#define RANGE_ARG
#define RANGE_PASS
#define WRITE(img, x, y, v) write_imagef(img, (int2)((x), (y)), STORE_RANGE(v))
#endif
// Host <-> image copies (buffer_transform.cl) are transfers, not an op's output: never counted.
#define WRITE_UNCOUNTED(img, x, y, v) write_imagef(img, (int2)((x), (y)), STORE_RANGE(v))
// For intermediates kept in float images whatever the data type.
#define WRITE_F32(img, x, y, v) write_imagef(img, (int2)((x), (y)), v)

// Zero the lanes of channel block `cb` that lie past `channels`.
inline float4 tail_zero(float4 v, int cb, int channels) {
  int left = channels - cb * 4;
  if (left >= 4) return v;
  if (left < 4) v.w = 0.0f;
  if (left < 3) v.z = 0.0f;
  if (left < 2) v.y = 0.0f;
  if (left < 1) v.x = 0.0f;
  return v;
}

// Element k (0..3) of a pixel.
inline float lane(float4 v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// One element of an NHWC tensor stored channel-major (x = c/4 * W + w, y = n * H + h).
inline float read_element(__read_only image2d_t img, int n, int h, int w, int c, int H, int W) {
  return lane(READ(img, (c >> 2) * W + w, n * H + h), c & 3);
}

// Activation codes: the order of mace/ops/gpu/kernel.py ACTIVATIONS.
#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_RELUX 2
#define ACT_CLIP 3
#define ACT_LEAKYRELU 4
#define ACT_SIGMOID 5
#define ACT_TANH 6
#define ACT_ELU 7
#define ACT_HARDSIGMOID 8
#define ACT_HARDSWISH 9
#define ACT_GELU 10
#define ACT_GELU_TANH 11
#define ACT_SOFTPLUS 12
#define ACT_SOFTSIGN 13
#define ACT_SELU 14
#define ACT_MISH 15

// alpha: leaky slope, elu/selu alpha, clip min, hardsigmoid slope;
// limit: relux/clip max, hardsigmoid offset, selu scale.
inline float4 activate(float4 x, int act, float alpha, float limit) {
  switch (act) {
    case ACT_RELU: return fmax(x, 0.0f);
    case ACT_RELUX: return clamp(x, 0.0f, limit);
    case ACT_CLIP: return clamp(x, alpha, limit);
    case ACT_LEAKYRELU: return select(x * alpha, x, x >= 0.0f);
    case ACT_SIGMOID: return 1.0f / (1.0f + exp(-x));
    case ACT_TANH: return tanh(x);
    case ACT_ELU: return select(alpha * expm1(fmin(x, 0.0f)), x, x > 0.0f);
    case ACT_HARDSIGMOID: return clamp(x * alpha + limit, 0.0f, 1.0f);
    case ACT_HARDSWISH: return x * clamp(x / 6.0f + 0.5f, 0.0f, 1.0f);
    case ACT_GELU: return 0.5f * x * (1.0f + erf(x * 0.70710678f));
    case ACT_GELU_TANH:
      return 0.5f * x * (1.0f + tanh(0.79788456f * (x + 0.044715f * x * x * x)));
    case ACT_SOFTPLUS: return fmax(x, 0.0f) + log1p(exp(-fabs(x)));
    case ACT_SOFTSIGN: return x / (1.0f + fabs(x));
    case ACT_SELU: return limit * select(alpha * expm1(fmin(x, 0.0f)), x, x > 0.0f);
    case ACT_MISH: return x * tanh(fmax(x, 0.0f) + log1p(exp(-fabs(x))));
    default: return x;
  }
}
