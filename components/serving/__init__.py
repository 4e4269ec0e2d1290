"""Stage 3, serving one model: the Triton Deployment, its Service, Ingress (HTTP + gRPC), autoscaling on Triton's
own metrics, monitoring (ServiceMonitor, rules, dashboard) and the rollout watch.

May import :mod:`components.common`, :mod:`components.settings`, :mod:`components.rollout_watch` and
:mod:`tritonft`; never another stage.
"""
