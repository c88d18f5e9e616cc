"""Identity: output = input. Removed by the remove_identity pass; kept registered so
frontends can emit it (ONNX Identity/Dropout, TF Identity/StopGradient)."""
from mace.ops.registry import Layout, OpSpec, SimpleKernel, kernel, register_op


@register_op("Identity", layout=Layout.ELEMENTWISE)
class Identity(OpSpec):
    attrs = {}

    @staticmethod
    def infer(ctx):
        return [(tuple(ctx.shapes[0]), ctx.dtypes[0])]


@kernel("Identity", "cpu")
class IdentityCpu(SimpleKernel):
    def compute(self, x):
        return x
