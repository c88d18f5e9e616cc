"""Op attributes are declared once, on the op's spec (OpSpec.attrs: name -> default, REQUIRED for
none): a kernel or shape function asking `ctx.arg(name)` gets the declared default, and reading a
name the spec does not declare is an error in the test suite (a misspelt attribute would
otherwise read its default silently), a plain read for users."""
import numpy as np
import pytest

from mace.ir.args import set_arg
from mace.ops import registry
from mace.ops.registry import REQUIRED, KernelContext, UndeclaredAttributeError, all_ops
from mace.proto import mace_ir_pb2


def _ctx(op_type: str, **args) -> KernelContext:
    op = mace_ir_pb2.OperatorDef(name="n1", type=op_type)
    for k, v in args.items():
        set_arg(op, k, v)
    return KernelContext(op=op, input_shapes=[(2, 3)], input_dtypes=[np.float32],
                         output_shapes=[(2, 3)], output_dtypes=[np.float32])


def test_every_op_declares_its_attributes():
    for op_type, spec in all_ops().items():
        assert isinstance(spec.attrs, dict), op_type
        assert all(isinstance(k, str) for k in spec.attrs), op_type


def test_the_declared_default_is_what_a_read_without_one_gets():
    assert _ctx("Softmax").arg("axis") == -1 and _ctx("Softmax").arg("use_log") == 0
    assert _ctx("Softmax", axis=1).arg("axis") == 1
    assert _ctx("Softmax").arg("axis", 0) == 0   # an explicit default still wins
    assert _ctx("Conv2D").arg("activation") == "" and _ctx("Conv2D").arg("strides") == [1, 1]


def test_a_required_attribute_the_op_lacks_is_a_key_error():
    assert all_ops()["Concat"].attrs["axis"] is REQUIRED
    with pytest.raises(KeyError, match="has no argument 'axis'"):
        _ctx("Concat").arg("axis")


def test_an_undeclared_attribute_fails_in_the_tests_naming_op_spec_and_name(monkeypatch):
    monkeypatch.setattr(registry, "STRICT_ATTRS", True)
    with pytest.raises(UndeclaredAttributeError,
                       match=r"op 'n1' \(Softmax\) reads attribute 'axsi', which "
                             r"mace\.ops\.softmax\.Softmax\.attrs does not declare \(declared: axis, use_log\)"):
        _ctx("Softmax", axsi=1).arg("axsi", -1)


def test_for_users_an_undeclared_read_is_a_plain_read(monkeypatch):
    monkeypatch.setattr(registry, "STRICT_ATTRS", False)
    assert _ctx("Softmax", axsi=1).arg("axsi", -1) == 1 and _ctx("Softmax").arg("axsi", -1) == -1
