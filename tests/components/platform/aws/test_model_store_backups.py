"""A protected (prod) model store is backed up by AWS Backup's EFS plan; an unprotected one (dev) is not: losing
prod's store would otherwise mean hours of re-conversion and the gated models' token again (issue 51)."""

from __future__ import annotations

import pytest

from components.platform.aws.storage import BACKUP_POLICY
from tests.components.platform.aws.helpers import build_platform
from tritonft.synth.engine import RecordingMocks

BACKUP = "aws:efs/backupPolicy:BackupPolicy"
FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"


def test_prods_store_has_automatic_backups_on(mocks: RecordingMocks) -> None:
    build_platform(environment="prod")
    (fs,) = mocks.of_type(FILE_SYSTEM)
    (backup,) = mocks.of_type(BACKUP)
    assert backup.inputs["backupPolicy"] == {"status": "ENABLED"} == BACKUP_POLICY
    assert backup.inputs["fileSystemId"] == f"{fs.name}-id"
    assert fs.protect


@pytest.mark.parametrize(("environment", "protect"), [("dev", None), ("prod", False)])
def test_an_unprotected_store_has_none(mocks: RecordingMocks, environment: str, protect: bool | None) -> None:
    build_platform(environment=environment, protect_model_store=protect)
    assert mocks.of_type(BACKUP) == []
