"""triton-ft guardrails: pure checks (``checks``), the synth-output runner and the CrossGuard pack."""
