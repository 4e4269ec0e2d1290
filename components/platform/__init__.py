"""Stage 1, where the workloads run: the cluster target (an existing cluster, or EKS built by
:mod:`components.platform.aws`) and the Triton+engine server and tools images.

May import :mod:`components.common`, :mod:`components.settings` and :mod:`tritonft`; never another stage.
"""
