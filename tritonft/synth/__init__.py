"""``tritonft synth``: the real Pulumi program, run offline under the mock engine, written to disk."""
