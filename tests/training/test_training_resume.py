"""Interrupted training resumes from its last checkpoint and ends where an uninterrupted run ends.

In process, a run is "killed" by a callback raising KeyboardInterrupt at a chosen step (a kill that
leaves no time to save: the rerun resumes from the last periodic checkpoint), or interrupted by a
real SIGINT or SIGTERM sent to the process (a checkpoint of the step in flight is written on the
way out: the rerun resumes there); the subprocess tests send real signals to `stages/train.py`. The
checkpoint holds weights, optimizer and scheduler, loop counters and data position, callback
states, RNG states and a recurrent model's carried hidden state, so on CPU the resumed run must
reproduce the uninterrupted one bit for bit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
import yaml

from interrupts import FirstStep, InterruptAt, KillAt, train_with
from nlpzoo import lifecycle, training
from nlpzoo.tracking import Tracker
from toy import RESUME_RUNS, inactive, make_project, resume_params, write_benchmarks

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path, no_tracking):
    # MLflow is not under test here: an inactive tracker keeps these runs fast (no_tracking)
    handler = signal.getsignal(signal.SIGINT)
    yield make_project(tmp_path)
    signal.signal(signal.SIGINT, handler)  # Lightning ignores SIGINT after a KeyboardInterrupt


def _weights(root: Path, run: str) -> dict:
    return torch.load(root / "models" / run / "model.pt", weights_only=True)["state_dict"]


def _curve(root: Path, run: str) -> list[tuple]:
    """(epoch, step, val_loss, val_ppl) rows; train_loss of a resumed epoch averages only the
    batches after the resume, so it is left out."""
    rows = (root / "plots" / f"{run}.csv").read_text().split()[1:]
    return [tuple(r.split(",")[i] for i in (0, 1, 3, 4)) for r in rows]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """`uninterrupted(run)`: (weights, curve) of the run trained without interruption, once."""
    done: dict[str, tuple[dict, list]] = {}

    def get(run: str) -> tuple[dict, list]:
        if run not in done:
            root = make_project(tmp_path_factory.mktemp(f"uninterrupted-{run}"))
            starts: list[int] = []
            with pytest.MonkeyPatch.context() as m:
                m.setattr(Tracker, "start", classmethod(inactive))
                train_with(m, resume_params(run), run, root, FirstStep(starts))
            assert starts == [0]
            # kept until the evaluate stage: a rerun of this stage resumes from them
            assert (root / "checkpoints" / run / "resume.ckpt").is_file()
            done[run] = (_weights(root, run), _curve(root, run))
        return done[run]

    return get


def _no_output(root: Path, run: str) -> None:
    """Neither models/RUN nor a half-written temporary of it is left."""
    assert not (root / "models" / run).exists()
    assert not list((root / "models").glob(f".{run}*")), list((root / "models").iterdir())


def _checkpoint_step(root: Path, run: str) -> int:
    ckpt = torch.load(root / "checkpoints" / run / "resume.ckpt", weights_only=True)
    return int(ckpt["global_step"])


# kill: no time to save (the step-40 periodic checkpoint is the last); SIGINT (Ctrl-C) and
# SIGTERM: the checkpoint of the step in flight is written before the process exits. Step 47 is
# mid second epoch (25-35 batches each), 7 steps after the step-40 checkpoint.
STOPS = {
    "kill": (lambda: KillAt(47), 40, (KeyboardInterrupt, SystemExit)),
    "SIGINT": (lambda: InterruptAt(47, signal.SIGINT), 47, SystemExit),  # Lightning: exit 1
    "SIGTERM": (lambda: InterruptAt(47, signal.SIGTERM), 47, SystemExit),  # the stage: 143
}


@pytest.mark.parametrize("stop", list(STOPS))
@pytest.mark.parametrize("run", list(RESUME_RUNS))
def test_stopped_run_resumes_and_ends_like_an_uninterrupted_one(
    project, monkeypatch, uninterrupted, run, stop
):
    from pytorch_lightning.utilities.exceptions import SIGTERMException

    params, starts = resume_params(run), []
    reference, curve = uninterrupted(run)
    make, resumes_at, raised = STOPS[stop]
    term = signal.getsignal(signal.SIGTERM)
    with pytest.raises(raised) as stopped:
        train_with(monkeypatch, params, run, project, make(), FirstStep(starts))
    if stop == "SIGINT":
        assert stopped.type is SystemExit and stopped.value.code == 1
    if stop == "SIGTERM":
        assert stopped.type is SIGTERMException  # the stage exits with 143 (cli.run_stage)
    assert signal.getsignal(signal.SIGTERM) == term  # the fit's handler is gone
    assert _checkpoint_step(project, run) == resumes_at
    _no_output(project, run)

    train_with(monkeypatch, params, run, project, FirstStep(starts))
    assert starts == [0, resumes_at]  # where the checkpoint was written, not from step 0
    resumed = _weights(project, run)
    for name, tensor in reference.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=0, atol=0, msg=name)
    assert _curve(project, run) == curve


# 34 steps an epoch: the first epoch's last two steps, the second's first, the run's last
@pytest.mark.parametrize("at", [33, 34, 35, 68])
def test_an_interrupt_near_an_epoch_end_resumes_like_an_uninterrupted_run(
    project, monkeypatch, uninterrupted, at
):
    """A signal during an epoch's last steps (then validation, the epoch-end checkpoint) or
    the next epoch's first: the rerun resumes at the step it was saved at and ends the same."""
    run, starts = "nnlm", []
    reference, curve = uninterrupted(run)
    params = resume_params(run)
    with pytest.raises(SystemExit):
        train_with(monkeypatch, params, run, project, InterruptAt(at), FirstStep(starts))
    saved = _checkpoint_step(project, run)
    assert saved == at
    train_with(monkeypatch, params, run, project, FirstStep(starts))
    # the run's last step: the checkpoint is the finished run's, and the rerun trains nothing
    assert starts == ([0] if at == 68 else [0, saved])
    resumed = _weights(project, run)
    for name, tensor in reference.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=0, atol=0, msg=name)
    assert _curve(project, run) == curve


def test_resumed_run_continues_its_own_mlflow_run(tmp_path, monkeypatch):
    """The killed run's MLflow run (recorded in checkpoints/RUN/) goes on after the resume: one
    MLflow run in the end, FINISHED, with the curve points of before and after the kill."""
    from mlflow import MlflowClient

    root = make_project(tmp_path / "proj")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    run, starts = "nnlm", []
    params = resume_params(run)
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        train_with(monkeypatch, params, run, root, KillAt(47), FirstStep(starts))
    signal.signal(signal.SIGINT, handler)
    recorded = json.loads((root / "checkpoints" / run / "mlflow_run.json").read_text())["run_id"]
    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(recorded).info.status == "FAILED"

    train_with(monkeypatch, params, run, root, FirstStep(starts))
    assert starts == [0, 40]
    runs = client.search_runs([client.get_experiment_by_name("nlpzoo").experiment_id])
    assert [r.info.run_id for r in runs] == [recorded]
    assert runs[0].info.status == "FINISHED"
    assert json.loads((root / "models" / run / "mlflow_run.json").read_text())["run_id"] == recorded
    history = client.get_metric_history(recorded, "val/ppl")
    steps = [int(r.split(",")[1]) for r in (root / "plots" / f"{run}.csv").read_text().split()[1:]]
    assert len(steps) == 2 and [m.step for m in history] == steps  # epoch 0 before the kill


def test_changed_params_start_fresh(project, monkeypatch):
    run, starts = "nnlm", []
    params = resume_params(run)
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        train_with(monkeypatch, params, run, project, KillAt(25), FirstStep(starts))
    params[run]["lr"] = 0.05  # one other setting: the checkpoint of step 20 is not its
    train_with(monkeypatch, params, run, project, FirstStep(starts))
    assert starts == [0, 0]


@pytest.mark.parametrize("change", ["corpus", "vocabulary"])
def test_changed_data_starts_fresh(project, monkeypatch, caplog, change):
    """The same params on other data: one token of the training corpus, or a vocabulary of
    other counts."""
    run, starts = "nnlm", []
    params = resume_params(run)
    _killed(monkeypatch, params, run, project, 25, starts)
    lm = project / "data" / "vocab" / "lm"
    if change == "corpus":
        train = np.load(lm / "train.npy")
        train[len(train) // 2] = (train[len(train) // 2] + 1) % train.max()
        np.save(lm / "train.npy", train)
    else:
        lines = (lm / "vocab.txt").read_text().splitlines()
        word, count = lines[-1].split("\t")  # word<TAB>count
        lines[-1] = f"{word}\t{int(count) + 1}"
        (lm / "vocab.txt").write_text("\n".join(lines) + "\n")
    with caplog.at_level("WARNING"):
        train_with(monkeypatch, params, run, project, FirstStep(starts))
    assert starts == [0, 0]
    assert f"checkpoints/{run}: written for other data; training from the start" in caplog.text


def test_fingerprint_covers_settings_and_every_token():
    stream = np.arange(1000) % 17
    other = stream.copy()
    other[500] = 3
    base = training.fingerprint({"lr": 0.1}, [stream])
    assert base == training.fingerprint({"lr": 0.1}, [stream.copy()])
    assert base != training.fingerprint({"lr": 0.2}, [stream])
    assert base != training.fingerprint({"lr": 0.1}, [other])
    cfg = training.TrainerConfig()
    frequency = training.TrainerConfig(checkpoint_every_steps=5, checkpoint_every_minutes=1.0)
    assert cfg.result_settings() == frequency.result_settings()  # how often is not what
    assert cfg.result_settings() != training.TrainerConfig(max_epochs=9).result_settings()


def test_prepare_resume_needs_a_matching_readable_checkpoint(tmp_path):
    ckpt = tmp_path / "checkpoints" / "run"
    assert training.prepare_resume(ckpt, "a" * 64) is None  # nothing yet: starts, stamps
    assert (ckpt / "fingerprint").read_text().strip() == "a" * 64
    torch.save({"global_step": 12}, ckpt / "resume.ckpt")
    assert training.prepare_resume(ckpt, "a" * 64) == ckpt / "resume.ckpt"
    (ckpt / "resume.ckpt").write_bytes(b"truncated by a kill")
    assert training.prepare_resume(ckpt, "a" * 64) is None  # unreadable: fresh
    torch.save({"global_step": 12}, ckpt / "resume.ckpt")
    assert training.prepare_resume(ckpt, "b" * 64) is None  # another fingerprint: set aside
    assert sorted(p.name for p in ckpt.iterdir()) == ["fingerprint", "stale"]


def test_checkpoints_of_other_settings_are_kept_aside_bounded_and_restored(tmp_path, caplog):
    """A mismatched set goes to stale/<fingerprint[:12]>/ with the fingerprint.json naming its
    params; the newest three sets are kept; the fingerprint of a kept set brings it back."""
    ckpt = tmp_path / "checkpoints" / "run"
    stale = ckpt / "stale"

    def interrupted(fp: str, step: int) -> None:  # a run of fingerprint `fp` killed at `step`
        training.prepare_resume(ckpt, fp, parts={"params": {"lr": fp[0]}})
        torch.save({"global_step": step}, ckpt / "resume.ckpt")

    interrupted("a" * 64, 1)
    with caplog.at_level("WARNING"):
        interrupted("b" * 64, 2)
    kept = stale / ("a" * 12)
    assert sorted(p.name for p in kept.iterdir()) == [
        "fingerprint",
        "fingerprint.json",
        "resume.ckpt",
    ]
    assert json.loads((kept / "fingerprint.json").read_text()) == {"params": {"lr": "a"}}
    moved = [r.getMessage() for r in caplog.records if "moved to" in r.getMessage()]
    assert moved == [
        f"checkpoints/run: the checkpoints of its earlier settings moved to "
        f"checkpoints/run/stale/{'a' * 12} (see fingerprint.json there)"
    ]
    for fp, step in (("c" * 64, 3), ("d" * 64, 4), ("e" * 64, 5)):
        interrupted(fp, step)
    assert sorted(p.name for p in stale.iterdir()) == ["b" * 12, "c" * 12, "d" * 12]  # newest 3
    assert torch.load(ckpt / "resume.ckpt", weights_only=True)["global_step"] == 5

    # the settings of a kept set again: it is resumed; the current one takes its place aside
    assert training.prepare_resume(ckpt, "c" * 64) == ckpt / "resume.ckpt"
    assert torch.load(ckpt / "resume.ckpt", weights_only=True)["global_step"] == 3
    assert (ckpt / "fingerprint").read_text().strip() == "c" * 64
    assert sorted(p.name for p in stale.iterdir()) == ["b" * 12, "d" * 12, "e" * 12]
    assert torch.load(stale / ("e" * 12) / "resume.ckpt", weights_only=True)["global_step"] == 5
    # a set without a checkpoint (killed before its first) is not worth keeping
    training.prepare_resume(ckpt, "f" * 64)
    training.prepare_resume(ckpt, "0" * 64)
    assert "f" * 12 not in [p.name for p in stale.iterdir()]


def test_reverting_a_change_resumes_the_checkpoints_kept_aside(project, monkeypatch, caplog):
    """Killed with lr 0.1 (checkpoint of step 20), rerun with lr 0.05 (fresh, killed again),
    then with lr 0.1 again: that rerun resumes at step 20 and ends as an uninterrupted run."""
    run, starts = "nnlm", []
    params = resume_params(run, max_epochs=1)
    _killed(monkeypatch, params, run, project, 25, starts)
    other = resume_params(run, max_epochs=1)
    other[run]["lr"] = 0.05
    _killed(monkeypatch, other, run, project, 15, starts)
    (kept,) = (project / "checkpoints" / run / "stale").iterdir()
    recorded = json.loads((kept / "fingerprint.json").read_text())
    assert recorded["params"]["config"]["lr"] == 0.1  # what the set kept aside trained with
    with caplog.at_level("INFO"):
        train_with(monkeypatch, params, run, project, FirstStep(starts))
    assert starts == [0, 0, 20]
    assert "restored from stale/" in caplog.text
    reference = make_project(project / "reference")
    train_with(monkeypatch, params, run, reference)
    for name, tensor in _weights(reference, run).items():
        torch.testing.assert_close(_weights(project, run)[name], tensor, rtol=0, atol=0, msg=name)


def test_sigkill_then_rerun_resumes_the_stage(tmp_path, uninterrupted):
    """`python stages/train.py` killed with SIGKILL after its first checkpoint, then rerun."""
    run = "lstm_lm"
    project = make_project(tmp_path)
    (project / "params.yaml").write_text(yaml.safe_dump(resume_params(run)))
    reference, _ = uninterrupted(run)

    # an unusable tracking URI: MLflow is skipped after one warning
    # (tests/tracking/test_tracking.py)
    env = dict(os.environ, MLFLOW_TRACKING_URI="unsupported-scheme://nowhere")
    cmd = [sys.executable, str(ROOT / "stages" / "train.py"), run]
    proc = subprocess.Popen(cmd, cwd=project, env=env, stderr=subprocess.PIPE, text=True)
    ckpt = project / "checkpoints" / run / "resume.ckpt"
    deadline = time.monotonic() + 120
    while not ckpt.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert ckpt.is_file()

    done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming from" in done.stderr and "(step 0)" not in done.stderr, done.stderr[-3000:]
    resumed = _weights(project, run)
    for name, tensor in reference.items():
        torch.testing.assert_close(resumed[name], tensor, msg=name)


def test_sigterm_makes_the_stage_fail_with_a_hint(monkeypatch, capsys):
    """Lightning turns SIGTERM into SIGTERMException, a SystemExit with status 0; the stage
    must still fail, or DVC would take a half-trained run for a finished one."""
    from pytorch_lightning.utilities.exceptions import SIGTERMException

    from nlpzoo.cli import run_stage

    def main(argv):
        raise SIGTERMException

    monkeypatch.setattr(sys, "argv", ["train.py", "lstm_lm"])
    with pytest.raises(SystemExit) as code:
        run_stage(main)
    assert code.value.code == 143
    assert "rerun the stage to resume" in capsys.readouterr().err


def test_checkpoint_every_minutes_and_steps_after_optimizer_steps(monkeypatch, tmp_path):
    clock = {"now": 0.0}
    monkeypatch.setattr(training.resume.time, "monotonic", lambda: clock["now"])
    saved: list[int] = []

    class Trainer:  # what ResumeCheckpoint reads
        global_step = 0
        world_size = 1
        strategy = type("S", (), {"broadcast": staticmethod(lambda obj: obj)})

    for every_steps, every_minutes, expected in ((0, 1.0, [60, 120, 180]), (50, 0, [50, 100, 150])):
        saved.clear()
        cb = training.ResumeCheckpoint(tmp_path, every_steps, every_minutes)

        def save(trainer, cb=cb):
            saved.append(trainer.global_step)
            cb._last_time = clock["now"]

        monkeypatch.setattr(cb, "save", save)
        Trainer.global_step = 0
        cb.on_train_start(Trainer, None)
        for step in range(1, 200):
            Trainer.global_step = step
            clock["now"] += 1.0  # one second per step
            cb.on_train_batch_end(Trainer, None, None, None, step)
            cb.on_train_batch_end(Trainer, None, None, None, step)  # no new optimizer step
        cb.teardown(Trainer, None, "fit")
        assert saved == expected


def _killed(monkeypatch, params: dict, run: str, root: Path, at: int, starts: list) -> None:
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        train_with(monkeypatch, params, run, root, KillAt(at), FirstStep(starts))
    signal.signal(signal.SIGINT, handler)
    assert (root / "checkpoints" / run / "resume.ckpt").is_file()


def test_changed_code_starts_fresh_and_ends_the_old_mlflow_run(tmp_path, monkeypatch, caplog):
    """A checkpoint written by other code (one code dep's hash differs) is not resumed: one log
    line names the file, the interrupted MLflow run ends KILLED, a new one trains from step 0."""
    from mlflow import MlflowClient

    root = make_project(tmp_path / "proj")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    run, starts = "nnlm", []
    params = resume_params(run, max_epochs=1)
    _killed(monkeypatch, params, run, root, 25, starts)
    old = json.loads((root / "checkpoints" / run / "mlflow_run.json").read_text())["run_id"]
    real = lifecycle._hash_file
    edited = "src/nlpzoo/models/nnlm.py"
    monkeypatch.setattr(
        lifecycle, "_hash_file", lambda p: "0" * 64 if p.as_posix().endswith(edited) else real(p)
    )
    with caplog.at_level("WARNING"):
        train_with(monkeypatch, params, run, root, FirstStep(starts))
    assert starts == [0, 0]
    lines = [r.getMessage() for r in caplog.records if "training from the start" in r.getMessage()]
    assert lines == [
        f"checkpoints/{run}: written by other code ({edited} changed); training from the start"
    ]
    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(old).info.status == "KILLED"
    new = json.loads((root / "models" / run / "mlflow_run.json").read_text())["run_id"]
    assert new != old and client.get_run(new).info.status == "FINISHED"


def test_other_torch_version_starts_fresh(project, monkeypatch, caplog):
    run, starts = "nnlm", []
    params = resume_params(run, max_epochs=1)
    _killed(monkeypatch, params, run, project, 25, starts)
    monkeypatch.setattr(torch, "__version__", "0.0.1")
    with caplog.at_level("WARNING"):
        train_with(monkeypatch, params, run, project, FirstStep(starts))
    assert starts == [0, 0]
    assert "written with other versions (torch " in caplog.text


@pytest.mark.parametrize("damage", ["corrupt", "other_weights"])
def test_unloadable_checkpoint_starts_fresh_without_a_traceback(project, monkeypatch, damage):
    run, starts = "nnlm", []
    params = resume_params(run, max_epochs=1)
    _killed(monkeypatch, params, run, project, 25, starts)
    path = project / "checkpoints" / run / "resume.ckpt"
    if damage == "corrupt":
        path.write_bytes(path.read_bytes()[:100])
    else:  # weights of another shape: load_state_dict would fail inside Trainer.fit
        ckpt = torch.load(path, weights_only=True)
        key = next(iter(ckpt["state_dict"]))
        ckpt["state_dict"][key] = torch.zeros(3, 3)
        torch.save(ckpt, path)
    stats = train_with(monkeypatch, params, run, project, FirstStep(starts))
    assert starts == [0, 0] and stats["epochs"] == 1


class _Slow(pl.Callback):
    """Each training batch takes at least `seconds` (a known floor for the fitting time)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        time.sleep(self.seconds)


def test_resumed_run_reports_time_and_throughput_over_the_whole_training(project, monkeypatch):
    """fit_seconds adds the killed process's seconds up to its checkpoint, so the throughput is
    the tokens of all epochs over the time of both processes, not several times too high."""
    run, starts, pause = "nnlm", [], 0.2
    params = resume_params(run)
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        train_with(monkeypatch, params, run, project, _Slow(pause), KillAt(47), FirstStep(starts))
    signal.signal(signal.SIGINT, handler)
    stats = train_with(
        monkeypatch, params, run, project, FirstStep(starts)
    )  # fast after the resume
    assert starts == [0, 40]
    assert stats["fit_seconds"] >= pause * 40  # the 40 slow steps of the checkpoint resumed from
    tokens = int(np.load(project / "data" / "vocab" / "lm" / "train.npy").size) * 2  # 2 epochs
    assert stats["train_tokens_per_s"] == pytest.approx(tokens / stats["fit_seconds"], rel=0.01)


def test_checkpoints_outside_the_checkpoints_folder_are_never_deleted(tmp_path):
    from nlpzoo.errors import ConfigError

    (tmp_path / "checkpoints" / "run").mkdir(parents=True)
    (tmp_path / "keep.txt").write_text("project file")
    with pytest.raises(ConfigError, match="refusing to delete"):
        training.remove_checkpoints(tmp_path / "checkpoints" / "..")  # a run named '..'
    with pytest.raises(ConfigError):
        training.prepare_resume(tmp_path / "checkpoints" / "..", "a" * 64)
    assert (tmp_path / "keep.txt").is_file()
    training.remove_checkpoints(tmp_path / "checkpoints" / "run")
    assert not (tmp_path / "checkpoints" / "run").exists() and (tmp_path / "checkpoints").is_dir()


class _Batches(pl.Callback):
    """Counts the training batches of every fit it is given to."""

    def __init__(self) -> None:
        self.count = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.count += 1


@pytest.mark.parametrize(
    ("end", "section", "trainer"),
    [
        ("max_epochs", {}, {}),
        # on this data the validation perplexity rises after epoch 2: patience 1 stops at 3
        (
            "early stopping",
            {"optimizer": "adam", "lr": 0.2},
            {"max_epochs": 10, "early_stopping_patience": 1},
        ),
    ],
)
def test_a_finished_run_keeps_its_checkpoints_until_evaluate_and_its_rerun_trains_nothing(
    tmp_path, monkeypatch, end, section, trainer
):
    """A kill after train renamed models/RUN into place, before DVC recorded it: DVC removes the
    stage's outputs and reruns it. It resumes from the run's last checkpoint, trains nothing (an
    early-stopped run no further epoch either) and writes the same model, curve and stats. The
    evaluate stage removes the checkpoints."""
    run = "nnlm"
    root = write_benchmarks(make_project(tmp_path / "proj"))
    params = resume_params(run, **trainer)
    params[run].update(section)
    monkeypatch.setattr(Tracker, "start", classmethod(inactive))
    counter = _Batches()
    first = train_with(monkeypatch, params, run, root, counter)
    trained = counter.count
    assert trained > 0 and (root / "checkpoints" / run / "resume.ckpt").is_file()
    tokens = int(np.load(root / "data" / "vocab" / "lm" / "train.npy").size)
    assert first["train_tokens"] == tokens * first["epochs"]  # the report's compute axis
    if end == "early stopping":
        assert first["epochs"] < params[run]["trainer"]["max_epochs"]  # it did stop early
    weights, curve = _weights(root, run), (root / "plots" / f"{run}.csv").read_text()

    shutil.rmtree(root / "models" / run)  # what DVC does before it reruns the stage
    (root / "plots" / f"{run}.csv").unlink()
    again = train_with(monkeypatch, params, run, root, counter)
    assert counter.count == trained  # not one more batch
    for name, tensor in weights.items():
        torch.testing.assert_close(_weights(root, run)[name], tensor, rtol=0, atol=0, msg=name)
    assert (root / "plots" / f"{run}.csv").read_text() == curve
    assert again["epochs"] == first["epochs"] and again["precision"] == first["precision"]
    assert again["train_tokens"] == first["train_tokens"]
    # the time of the first process, up to its last checkpoint, counts: the same throughput
    assert again["train_tokens_per_s"] == pytest.approx(first["train_tokens_per_s"], rel=0.25)
    assert (root / "checkpoints" / run).is_dir()

    lifecycle.evaluate(params, run, root)
    assert not (root / "checkpoints" / run).exists()
    assert (root / "metrics" / f"{run}.json").is_file()


def _md5(path: Path) -> str:
    import hashlib

    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("how", ["dvc.lock records the outputs", "NLPZOO_FRESH=1"])
def test_a_forced_rerun_of_a_finished_run_trains_afresh(tmp_path, monkeypatch, how):
    """`dvc repro --force train-RUN` after DVC recorded the finished run's outputs (dvc.lock
    holds the MD5 of the curve that training wrote), or NLPZOO_FRESH=1: the finished run's
    checkpoints are not resumed, the run trains again from step 0. (Without either, a rerun
    trains nothing: test_a_finished_run_keeps_its_checkpoints_until_evaluate_...)"""
    run, starts = "nnlm", []
    root = make_project(tmp_path / "proj")
    params = resume_params(run, max_epochs=1)
    monkeypatch.setattr(Tracker, "start", classmethod(inactive))
    counter = _Batches()
    train_with(monkeypatch, params, run, root, counter, FirstStep(starts))
    trained = counter.count
    curve = root / "plots" / f"{run}.csv"
    lock = {
        "schema": "2.0",
        "stages": {
            f"train-{run}": {
                "cmd": f"python stages/train.py {run}",
                "outs": [{"path": f"plots/{run}.csv", "hash": "md5", "md5": "0" * 32}],
            }
        },
    }
    (root / "dvc.lock").write_text(yaml.safe_dump(lock))  # an earlier training's outputs
    shutil.rmtree(root / "models" / run)  # what DVC does before it runs the stage
    curve.unlink()
    train_with(monkeypatch, params, run, root, counter, FirstStep(starts))
    assert counter.count == trained and starts == [0]  # not recorded: nothing to train again
    if how == "NLPZOO_FRESH=1":
        monkeypatch.setenv("NLPZOO_FRESH", "1")
    else:
        lock["stages"][f"train-{run}"]["outs"][0]["md5"] = _md5(curve)  # DVC committed them
        (root / "dvc.lock").write_text(yaml.safe_dump(lock))
    shutil.rmtree(root / "models" / run)
    curve.unlink()
    train_with(monkeypatch, params, run, root, counter, FirstStep(starts))
    assert starts == [0, 0] and counter.count == 2 * trained
    assert (root / "models" / run / "model.pt").is_file()


def test_best_checkpoint_state_names_its_files_relative_to_its_folder(tmp_path):
    """Saved in one folder and loaded in another (the project moved between a kill and the
    resume), the best score and best.ckpt's path follow the folder."""
    from pytorch_lightning.callbacks import ModelCheckpoint

    from nlpzoo.training.trainer import BestCheckpoint

    before, after = tmp_path / "a" / "checkpoints" / "run", tmp_path / "b" / "checkpoints" / "run"
    for cls in (BestCheckpoint, ModelCheckpoint):
        cb = cls(dirpath=before, filename="best", monitor="val/ppl", mode="min")
        cb.best_model_path = cb.kth_best_model_path = str(before / "best.ckpt")
        cb.best_model_score = cb.kth_value = torch.tensor(14.5)
        cb.best_k_models = {str(before / "best.ckpt"): torch.tensor(14.5)}
        state = cb.state_dict()
        moved = cls(dirpath=after, filename="best", monitor="val/ppl", mode="min")
        if cls is ModelCheckpoint:  # Lightning's own forgets the best score: what went wrong
            with pytest.warns(UserWarning, match="dirpath has changed"):
                moved.load_state_dict(state)
            assert moved.best_model_score is None
            continue
        assert str(before) not in repr(state)
        moved.load_state_dict(state)
        assert moved.best_model_score == torch.tensor(14.5)
        assert moved.best_model_path == moved.kth_best_model_path == str(after / "best.ckpt")
        assert list(moved.best_k_models) == [str(after / "best.ckpt")]
        again = cls(dirpath=before, filename="best", monitor="val/ppl", mode="min")
        again.load_state_dict(state)  # not moved: the same paths as before
        assert again.best_model_path == str(before / "best.ckpt")


class _BestAtStart(pl.Callback):
    """Records the best score the checkpoint callback holds when a fit starts."""

    def __init__(self, scores: list) -> None:
        self.scores = scores

    def on_train_start(self, trainer, pl_module) -> None:
        best = trainer.checkpoint_callback.best_model_score
        self.scores.append(None if best is None else float(best))


def test_a_project_moved_between_kill_and_resume_keeps_its_best_checkpoint(
    tmp_path, monkeypatch, uninterrupted
):
    run, starts, scores = "nnlm", [], []
    reference, curve = uninterrupted(run)
    monkeypatch.setattr(Tracker, "start", classmethod(inactive))
    params = resume_params(run)
    first = make_project(tmp_path / "first")
    _killed(monkeypatch, params, run, first, 47, starts)  # epoch 0 validated: best.ckpt
    moved = tmp_path / "moved"
    shutil.move(first, moved)
    train_with(monkeypatch, params, run, moved, FirstStep(starts), _BestAtStart(scores))
    assert starts == [0, 40]
    epoch0 = float(_curve(moved, run)[0][3])  # val_ppl of epoch 0
    assert scores == [pytest.approx(epoch0, rel=1e-6)]
    for name, tensor in reference.items():
        torch.testing.assert_close(_weights(moved, run)[name], tensor, rtol=0, atol=0, msg=name)
    assert _curve(moved, run) == curve


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_stage_resumes_at_the_step_it_stopped(tmp_path, signum):
    """`python stages/train.py` sent SIGINT (Ctrl-C) or SIGTERM once its first periodic
    checkpoint is written: it writes the checkpoint of the step in flight, exits with 1 or 143
    and leaves no models/RUN; the rerun resumes at that step, not the periodic checkpoint's."""
    import re

    run = "nnlm"
    project = make_project(tmp_path)
    (project / "params.yaml").write_text(yaml.safe_dump(resume_params(run)))
    env = dict(os.environ, MLFLOW_TRACKING_URI="unsupported-scheme://nowhere")
    cmd = [sys.executable, str(ROOT / "stages" / "train.py"), run]
    proc = subprocess.Popen(cmd, cwd=project, env=env, stderr=subprocess.PIPE, text=True)
    ckpt = project / "checkpoints" / run / "resume.ckpt"
    deadline = time.monotonic() + 120
    while not ckpt.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == (1 if signum == signal.SIGINT else 143), err[-3000:]
    stopped = re.search(r"interrupted after step (\d+): saved", err)
    assert stopped, err[-3000:]
    step = int(stopped.group(1))
    assert _checkpoint_step(project, run) == step
    _no_output(project, run)

    done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"(step {step})" in done.stderr, done.stderr[-3000:]
