"""CuPy baseline for sum_reduction: ``cupy.sum`` (a CUB device reduction) written into ``out``.

Called in the worker as ``sum_reduction(**parameters)`` with CuPy device arrays. ``out`` holds 0
before every call (it is an inout parameter with a constant-0 input), so overwriting it with the sum
gives the same result as the kernel's accumulation.
"""


def sum_reduction(x, out, **_):
    import cupy

    cupy.sum(x, keepdims=True, out=out)
