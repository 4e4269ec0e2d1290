"""ModelStore: an RWX claim sized from the models, protected when asked."""

from __future__ import annotations

import math
from typing import Any

import pytest

from components.common import sizing
from components.models.store import ModelStore, ModelStoreArgs
from tests.components.fixtures import GPTJ_6B, NAMESPACE, T5_SMALL, make_target
from tritonft.synth.engine import RecordingMocks, Registered, run_program

PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def _store(mocks: RecordingMocks, **kwargs: Any) -> Registered:
    run_program(lambda: ModelStore("store", ModelStoreArgs(target=make_target(), **kwargs)))
    (claim,) = mocks.of_type(PVC)
    return claim


def test_the_claim_is_read_write_many_on_the_target_storage_class(mocks):
    claim = _store(mocks, models=(T5_SMALL,))
    assert claim.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim.inputs["spec"]["storageClassName"] == "efs-sc"


def test_the_claim_has_an_explicit_name_and_namespace(mocks):
    claim = _store(mocks, models=(T5_SMALL,))
    assert claim.inputs["metadata"]["name"] == "store-models"
    assert claim.inputs["metadata"]["namespace"] == NAMESPACE


def test_the_claim_is_sized_from_the_converted_models(mocks):
    claim = _store(mocks, models=(T5_SMALL, GPTJ_6B), headroom=1.25)
    total = sizing.converted_bytes(T5_SMALL) + sizing.converted_bytes(GPTJ_6B)
    assert claim.inputs["spec"]["resources"]["requests"]["storage"] == f"{math.ceil(total * 1.25 / sizing.GIB)}Gi"


def test_an_explicit_size_wins(mocks):
    claim = _store(mocks, models=(GPTJ_6B,), size_gi=500)
    assert claim.inputs["spec"]["resources"]["requests"]["storage"] == "500Gi"


def test_a_protected_store_is_protected_and_retained_on_delete(mocks):
    claim = _store(mocks, models=(T5_SMALL,), protect=True)
    assert claim.protect and claim.retain_on_delete


def test_an_unprotected_store_can_be_destroyed(mocks):
    claim = _store(mocks, models=(T5_SMALL,))
    assert not claim.protect and not claim.retain_on_delete


def test_the_claim_uses_the_targets_provider_and_is_parented(mocks):
    claim = _store(mocks, models=(T5_SMALL,))
    (component,) = mocks.of_type("triton-ft:storage:ModelStore")
    assert "::test-k8s::" in claim.provider
    assert claim.parent == component.urn


def test_an_empty_store_without_a_size_is_refused(mocks):
    with pytest.raises(Exception, match="models is empty"):
        run_program(lambda: ModelStore("store", ModelStoreArgs(target=make_target(), models=())))
