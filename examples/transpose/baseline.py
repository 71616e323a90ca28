"""CuPy baseline for transpose: copy the transposed view ``src.T`` into ``dst`` (one strided copy kernel).

Called in the worker as ``transpose(**parameters)`` with CuPy device arrays; writes ``dst`` in place.
"""


def transpose(src, dst, **_):
    import cupy

    cupy.copyto(dst, src.T)
