"""Building blocks more than one stage uses: names, labels and metadata, the cluster target every stage places
its workloads on, pod security, the Deployment/PDB/probe shapes the Triton service and the gateway share,
Ingress and its authentication, and the sizing of every pod from the model's bytes.

May import :mod:`components.settings` and :mod:`tritonft` only.
"""
