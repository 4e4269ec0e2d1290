"""An OpenAI-compatible HTTP front for the rendered Triton ensembles (``tritonft gateway``).

``mapping`` turns OpenAI request bodies into ensemble inputs (pure), ``errors`` holds the OpenAI-style error
shape, ``sse`` the server-sent-event framing, ``metrics`` the Prometheus series, ``config`` the served models and
limits, ``app`` the ASGI routes and ``command`` the CLI.
"""
