"""``tritonft bench``: a load sweep of a deployed stack with the tools the field measures with.

AIPerf (NVIDIA's LLM benchmark) for the gateway's OpenAI routes, perf_analyzer for the models' KServe V2 endpoints;
the figures are theirs, collected into one CSV/JSON with plots. The project's own load generator is retired: its
Python client reached 0.80-0.86 of perf_analyzer's throughput on the same server, and its numbers compared with
nobody's.
"""
