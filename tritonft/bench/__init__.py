"""``tritonft bench``: an asyncio load generator for a KServe-V2 text endpoint (perf_analyzer-style results).

perf_analyzer itself needs Triton's model-config endpoint and a newer glibc than our images have; this generator
needs only the V2 inference API, so it also measures non-Triton servers.
"""
