"""Delivery: workflows, guardrail checks, the CrossGuard pack, guardrails over synth output."""
