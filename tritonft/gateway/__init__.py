"""An OpenAI-compatible HTTP front for the rendered Triton ensembles (``tritonft gateway``).

``mapping`` turns OpenAI request bodies into ensemble inputs (pure), ``errors`` holds the OpenAI-style error
shape, ``sse`` the server-sent-event framing, ``streaming`` the chunk events of a ``stream: true`` answer (primed:
an error before its first chunk is a plain HTTP error, never 200 and an error event), ``metrics`` the Prometheus
series, ``config`` the served models and limits, ``app`` the ASGI routes and ``command`` the CLI.
"""
