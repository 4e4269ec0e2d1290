"""The room above both halves: the commands that read a stack (they need ``components/`` to decide what a stack asks
for, and ``tritonft/`` to do the rest), and the generator of the documentation's references.

Arrows come only from here down: ``stackcli`` may import ``components`` and ``tritonft``; neither imports ``stackcli``,
and ``tritonft`` imports nothing of ``components`` (``tests/test_layers.py`` enforces all three). The ``tritonft``
console script is :func:`stackcli.cli.main`: the runtime's commands (``tritonft.cli.COMMANDS``) plus those here. The
tools image, which ships ``tritonft/`` alone, runs :func:`tritonft.cli.main` (the runtime's commands only).
"""
