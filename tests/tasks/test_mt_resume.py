"""A translation run killed at an epoch end resumes there and ends as an uninterrupted run does
(the MT loaders resume at epoch boundaries; see README "Interrupted training resumes")."""

from __future__ import annotations

import pytest
import torch

from interrupts import FirstStep, KillAt, train_with
from nlpzoo.io import remove_checkpoints
from toy import make_mt_project, tiny_params

RUN = "transformer"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_mt_project(tmp_path_factory.mktemp("mtresume"))


pytestmark = pytest.mark.usefixtures("no_tracking")  # tests/conftest.py


def test_killed_translation_run_resumes_from_its_last_epoch(project, monkeypatch):
    params = tiny_params(RUN)
    params[RUN]["trainer"].update(max_epochs=3, checkpoint_every_minutes=0)
    starts: list[int] = []
    uninterrupted = train_with(monkeypatch, params, RUN, project, FirstStep(starts))
    reference = torch.load(project / "models" / RUN / "model.pt", weights_only=True)["state_dict"]
    remove_checkpoints(project / "checkpoints" / RUN)  # as the evaluate stage does
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        train_with(monkeypatch, params, RUN, project, KillAt(7), FirstStep(starts))
    stats = train_with(monkeypatch, params, RUN, project, FirstStep(starts))
    assert starts == [0, 0, 5]  # 5 batches per epoch: resumed from the end of epoch 1
    resumed = torch.load(project / "models" / RUN / "model.pt", weights_only=True)["state_dict"]
    for name, tensor in reference.items():
        torch.testing.assert_close(resumed[name], tensor, msg=name)
    # the pieces trained on before the kill count too
    assert stats["train_target_tokens"] == uninterrupted["train_target_tokens"]
