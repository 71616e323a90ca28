"""Entry point of the worker process: ``python -m kernelopt_jupyter.worker``."""

from .server import main

main()
