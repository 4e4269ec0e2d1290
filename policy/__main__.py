"""The triton-ft guardrails as a CrossGuard policy pack: ``pulumi preview --policy-pack policy``.

Only constructs the pack (which starts the analyzer's gRPC server and never returns); the policies live in
``rules.py`` and the checks they run in ``checks.py``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pulumi_policy import EnforcementLevel, PolicyPack
from rules import POLICIES

PolicyPack(
    name="triton-ft-guardrails",
    policies=list(POLICIES),
    enforcement_level=EnforcementLevel.MANDATORY,
    description="triton-ft guardrails: pinned images, GPU scheduling, protected prod storage, TLS, secrets, limits.",
)
