"""Float64 reference for the launch-only sweep benchmark."""


def saxpy(a, x, y, **_):
    return a * x + y
