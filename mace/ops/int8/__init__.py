"""Quantized (uint8 activations, int8/uint8 weights, int32 bias) kernels, tag "int8".

One module per op, registered with @kernel(op_type, "int8"). They run on CPU for a
`quantize: 1` model and inside the DSP simulator (mace/runtime/dsp). Every kernel is
integer-only between its input and output (see mace/ir/quant_params.py) and bit-exact.
Conventions each kernel class declares for the quantize pass:
  check(ctx)            staticmethod, the one kernel check (mace/ops/registry.py): at load (ctx.stage
                        LOAD) None when its tensors are quantized (float nodes fall through), else
                        why not; asked by the quantize pass of a float op (CONVERT) None when
                        this op can be quantized, else the reason
  weight_inputs         {input index: per-channel axis or None} for constant weights
                        (or a staticmethod op -> that dict, when the axis depends on args)
  bias_input            index of an int32 bias input (scale = input scale * weight scale) or None
  float_inputs          indices of constant inputs left float (read at load, e.g. BatchNorm's)
  output_range          "own" (needs a range), "input" (inherits input 0's), or (lo, hi) fixed
"""
