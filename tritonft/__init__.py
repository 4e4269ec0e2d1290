"""triton-ft runtime library: the half of the project that runs inside cluster Jobs, in CI and on a laptop.

Nothing here imports Pulumi except the ``synth`` command. The shared vocabulary with the infrastructure half
is :mod:`tritonft.spec`.
"""

__version__ = "0.1.0"
