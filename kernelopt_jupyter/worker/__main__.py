"""Entry point of the worker process: ``python -m kernelopt_jupyter.worker``.

The guard matters: the NVRTC compile pool spawns processes that import this module again.
"""

from .server import main

if __name__ == "__main__":
    main()
