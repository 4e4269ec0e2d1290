"""The infrastructure half of triton-ft: one package per pipeline stage, composed by ``__main__.py``.

Layers (an import may only point down this list):

* ``__main__`` and :mod:`components.args`: composition (settings -> each stage's ``*Args``);
* the stages: :mod:`components.platform` (cluster target, AWS platform, images), :mod:`components.models`
  (model store, download/conversion Jobs), :mod:`components.serving` (Triton service, autoscaling, monitoring,
  rollouts), :mod:`components.gateway` (OpenAI-compatible API), :mod:`components.probe` (integration probe); a
  stage never imports another stage: what two stages share lives below them;
* :mod:`components.common`: Kubernetes building blocks more than one stage uses (names and labels, the cluster
  target, pod security, workloads, ingress, sizing);
* :mod:`components.settings`: the stack's settings, validated (pure; no Pulumi);
* :mod:`components.delivery`: apart from the stacks: the delivery account's deploy roles (a program of its own
  composes it, not ``__main__``; it imports nothing of the others);
* :mod:`tritonft` (the runtime library) and its engines (:mod:`tritonft.engines`).

``components.rollout_watch``, ``components.probe`` and ``components.probe.in_cluster`` hold Pulumi dynamic providers,
which are pickled by reference into every stack's state: their module paths are part of that state and must not move.
"""
