"""A kernel that breaks one tensor-descriptor rule per value of CHECK. The tests find the
line each error must point at by the comment that ends it (``# <CHECK>``)."""
import aotk
import aotk.language as tl


@aotk.jit
def bad_descriptor(x_ptr, n, big, f, CHECK: tl.constexpr):
    d = tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 16])
    if CHECK == "rank-0":
        tl.make_tensor_descriptor(x_ptr, [], [], [])  # rank-0
    elif CHECK == "rank-6":
        tl.make_tensor_descriptor(x_ptr, [n] * 6, [n] * 5 + [1], [1] * 5 + [16])  # rank-6
    elif CHECK == "strides-count":
        tl.make_tensor_descriptor(x_ptr, [n, n], [1], [16, 16])  # strides-count
    elif CHECK == "block-count":
        tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16])  # block-count
    elif CHECK == "base-block":
        tl.make_tensor_descriptor(x_ptr + tl.arange(0, 16), [n], [1], [16])  # base-block
    elif CHECK == "base-int":
        tl.make_tensor_descriptor(n, [n], [1], [16])  # base-int
    elif CHECK == "block-power-of-two":
        tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 24])  # block-power-of-two
    elif CHECK == "block-runtime":
        tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, n])  # block-runtime
    elif CHECK == "16-bytes":
        tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 2])  # 16-bytes
    elif CHECK == "last-stride":
        tl.make_tensor_descriptor(x_ptr, [n, n], [n, 2], [16, 16])  # last-stride
    elif CHECK == "last-stride-runtime":
        tl.make_tensor_descriptor(x_ptr, [n, n], [n, n], [16, 16])  # last-stride-runtime
    elif CHECK == "shape-float":
        tl.make_tensor_descriptor(x_ptr, [n, 2.5], [n, 1], [16, 16])  # shape-float
    elif CHECK == "shape-float-tensor":
        tl.make_tensor_descriptor(x_ptr, [n, f], [n, 1], [16, 16])  # shape-float-tensor
    elif CHECK == "shape-block":
        tl.make_tensor_descriptor(x_ptr, [tl.arange(0, 4), n], [n, 1], [16, 16])  # shape-block
    elif CHECK == "stride-float":
        tl.make_tensor_descriptor(x_ptr, [n, n], [f, 1], [16, 16])  # stride-float
    elif CHECK == "padding-nan":
        tl.make_tensor_descriptor(x_ptr, [n], [1], [16], padding_option="nan")  # padding-nan
    elif CHECK == "offsets-count":
        d.load([0])  # offsets-count
    elif CHECK == "offset-int64":
        d.load([big, 0])  # offset-int64
    elif CHECK == "offset-float":
        d.load([0, f])  # offset-float
    elif CHECK == "offset-too-big":
        d.load([0, 2**31])  # offset-too-big
    elif CHECK == "store-shape":
        d.store([0, 0], tl.zeros([16], tl.float32))  # store-shape
    elif CHECK == "store-scalar":
        d.store([0, 0], 1.0)  # store-scalar
    elif CHECK == "not-a-descriptor":
        tl.load_tensor_descriptor(x_ptr, [0, 0])  # not-a-descriptor
