"""The pack's modules import each other by bare name (as when Pulumi runs the pack from its directory)."""

from __future__ import annotations

import sys
from pathlib import Path

POLICY_DIR = Path(__file__).resolve().parents[1]
REPO = POLICY_DIR.parent
for folder in (POLICY_DIR, REPO):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
