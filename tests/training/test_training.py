"""Tests for the Lightning glue in nlpzoo.training: FamilyModule, make_trainer, the learning curve,
the non-finite-loss stop and make_optimizer (weight decay on weights only, ε_0 / (1 + r t))."""

from __future__ import annotations

import itertools
import math
import os
import re
from dataclasses import dataclass

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from tiny_nnlm import BATCH, N1, V, loader, read_curve, stream, tiny_config, trainer_config

from nlpzoo.errors import ConfigError, TrainingError
from nlpzoo.evaluation.perplexity import perplexity, window_log_probs
from nlpzoo.models.nnlm import NNLM, Config
from nlpzoo.training import FamilyModule, make_optimizer, make_trainer
from nlpzoo.training.module import lr_factor
from nlpzoo.training.trainer import local_checkpoint_io

TRAIN_TOKENS = 100  # 6 batches of 16 and one of 4
VALID_TOKENS = 53  # 3 batches of 16 and one of 5


pytestmark = pytest.mark.usefixtures("one_thread", "unseeded")


class RecordingTracker:
    """Stands in for nlpzoo.tracking.Tracker: records what the callbacks log."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict, int | None]] = []

    def log_metrics(self, metrics, step=None) -> None:
        self.calls.append((dict(metrics), step))


# ---------------------------------------------------------------------------------- a short run


def test_family_module_trains_and_logs_exact_validation_perplexity(tmp_path):
    torch.manual_seed(0)  # the initial weights, whatever ran before in this process
    train, valid = stream(0, TRAIN_TOKENS), stream(1, VALID_TOKENS)
    module = FamilyModule("nnlm", tiny_config(), V, run="tiny")
    assert isinstance(module.model, NNLM)
    before = window_log_probs(module.model, valid, N1)
    tracker = RecordingTracker()
    plots = tmp_path / "plots" / "tiny.csv"
    trainer = make_trainer(trainer_config(), "tiny", plots, tmp_path / "ckpt", tracker, seed=0)
    trainer.fit(module, loader(train, True), loader(valid, False))

    batches_per_epoch = math.ceil(TRAIN_TOKENS / BATCH)
    assert trainer.global_step == 2 * batches_per_epoch

    # the learning curve: one row per epoch, the documented columns
    fields, rows = read_curve(plots)
    assert fields == ["epoch", "step", "train_loss", "val_loss", "val_ppl", "seconds"]
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    assert [int(r["step"]) for r in rows] == [batches_per_epoch, 2 * batches_per_epoch]
    for r in rows:
        assert math.isfinite(float(r["train_loss"]))  # completed at the end of the epoch
        assert float(r["val_ppl"]) == pytest.approx(math.exp(float(r["val_loss"])), rel=1e-5)
        assert float(r["seconds"]) >= 0
    assert float(rows[1]["seconds"]) >= float(rows[0]["seconds"])
    assert float(rows[1]["train_loss"]) == pytest.approx(
        float(trainer.callback_metrics["train/loss_epoch"]), rel=1e-6
    )

    # val/ppl is the perplexity of the whole validation stream, not an average over batches
    module.eval()
    lp = window_log_probs(module.model, valid, N1)
    exact = perplexity(lp)
    assert not np.allclose(lp, before)  # it did train
    logged = float(trainer.callback_metrics["val/ppl"])
    assert logged == pytest.approx(exact, rel=1e-5)
    assert float(trainer.callback_metrics["val/loss"]) == pytest.approx(-lp.mean(), rel=1e-5)
    assert float(rows[-1]["val_ppl"]) == pytest.approx(exact, rel=1e-5)
    # ... and the data make the difference visible: per-batch averages are measurably off
    sizes = [16, 16, 16, 5]
    bounds = np.cumsum([0, *sizes])
    batch_nll = [-lp[a:b].mean() for a, b in itertools.pairwise(bounds)]
    assert abs(math.exp(np.mean(batch_nll)) / exact - 1) > 1e-3
    assert abs(np.mean(np.exp(batch_nll)) / exact - 1) > 1e-3

    # what went to the tracker: val/loss, val/ppl, epoch at each curve step, train/loss per step
    val_calls = [(m, s) for m, s in tracker.calls if "val/ppl" in m]
    assert [s for _, s in val_calls] == [batches_per_epoch, 2 * batches_per_epoch]
    assert [m["epoch"] for m, _ in val_calls] == [0, 1]
    assert val_calls[-1][0]["val/ppl"] == pytest.approx(exact, rel=1e-5)
    train_steps = [s for m, s in tracker.calls if "train/loss" in m]
    # every step once (log_every_n_steps=1), counted from 0 or 1
    assert train_steps == list(range(train_steps[0], train_steps[0] + 2 * batches_per_epoch))
    assert train_steps[0] in (0, 1)

    # checkpoints in the checkpoint directory
    assert (tmp_path / "ckpt" / "best.ckpt").is_file()
    assert (tmp_path / "ckpt" / "resume.ckpt").is_file()
    assert not (tmp_path / "ckpt" / "last.ckpt").exists()  # one copy of the last state is enough


# ---------------------------------------------------------------------------------- non-finite loss


def test_nan_loss_stops_training_naming_run_step_and_hint(tmp_path, monkeypatch):
    train, valid = stream(2, TRAIN_TOKENS), stream(3, VALID_TOKENS)
    module = FamilyModule("nnlm", tiny_config(), V, run="nan-run")
    real_forward = module.model.forward
    calls = {"train": 0}
    bad_call = 9  # epoch 1 (7 batches per epoch), batch 2; 9 optimizer steps before it

    def forward(context, targets=None):
        logits, loss = real_forward(context, targets)
        if torch.is_grad_enabled() and module.model.training:
            calls["train"] += 1
            if calls["train"] == bad_call + 1:
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(module.model, "forward", forward)
    plots = tmp_path / "nan.csv"
    trainer = make_trainer(
        trainer_config(max_epochs=3), "nan-run", plots, tmp_path / "ckpt", None, seed=0
    )
    with pytest.raises(TrainingError) as e:
        trainer.fit(module, loader(train, True), loader(valid, False))
    msg = str(e.value)
    assert "nan-run" in msg
    assert "nan" in msg.lower()
    assert "epoch 1" in msg and "batch 2" in msg
    step = re.search(r"\bstep (\d+)", msg)
    assert step is not None, msg
    # the step of the bad loss (9), or the optimizer step it fed (10): never the batch index
    assert int(step.group(1)) in (bad_call, bad_call + 1)
    assert "hint" in msg and "learning rate" in msg
    assert calls["train"] == bad_call + 1  # stopped at once
    _, rows = read_curve(plots)
    assert [int(r["epoch"]) for r in rows] == [0]  # only the epoch completed before


def test_diverging_learning_rate_raises_training_error(tmp_path):
    train, valid = stream(4, TRAIN_TOKENS), stream(5, VALID_TOKENS)
    module = FamilyModule("nnlm", tiny_config(optimizer="sgd", lr=1e30), V, run="hot")
    trainer = make_trainer(
        trainer_config(max_epochs=1), "hot", tmp_path / "hot.csv", tmp_path / "ckpt", None, seed=0
    )
    with pytest.raises(TrainingError, match=r"run 'hot'.*step \d+.*hint.*lr=1e\+30"):
        trainer.fit(module, loader(train, True), loader(valid, False))


# ---------------------------------------------------------------------------------- optimizer


def nnlm(direct: bool = True, **kw) -> tuple[NNLM, Config]:
    torch.manual_seed(0)
    cfg = Config(context_size=N1, emb_dim=4, hidden_dim=6, direct=direct, **kw)
    return NNLM(cfg, V), cfg


@pytest.mark.parametrize(
    ("optimizer", "cls"), [("adam", torch.optim.Adam), ("sgd", torch.optim.SGD)]
)
def test_weight_decay_on_weights_not_biases(optimizer, cls):
    model, cfg = nnlm(optimizer=optimizer, weight_decay=0.25)
    opt = make_optimizer(model, cfg)
    assert type(opt) is cls  # Adam with L2 in the gradient, the paper's penalty (not AdamW)
    decay_of = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    assert (
        len(decay_of)
        == len(list(model.parameters()))
        == sum(len(g["params"]) for g in opt.param_groups)
    )  # every parameter in exactly one group
    biases = {"H.bias", "U.bias"}
    for name, p in model.named_parameters():
        assert decay_of[id(p)] == (0.0 if name in biases else 0.25), name
    assert {n for n, _ in model.named_parameters()} == biases | {
        "C.weight",
        "H.weight",
        "U.weight",
        "W.weight",
    }

    # the behaviour, not only the bookkeeping: a step with zero gradients only shrinks weights
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for name, p in model.named_parameters():
        if name in biases:
            assert torch.equal(p.detach(), before[name]), name
        elif optimizer == "sgd":
            torch.testing.assert_close(p.detach(), before[name] * (1 - cfg.lr * 0.25))
        else:  # Adam normalises the L2 gradient λθ: every weight moves lr towards zero
            torch.testing.assert_close(
                p.detach(), before[name] - cfg.lr * torch.sign(before[name]), atol=1e-6, rtol=0
            )


def test_adam_without_weight_decay_is_plain_adam():
    model, cfg = nnlm(optimizer="adam", weight_decay=0.0)
    opt = make_optimizer(model, cfg)
    assert type(opt) is torch.optim.Adam
    assert all(g["weight_decay"] == 0.0 for g in opt.param_groups)


@pytest.mark.parametrize("r", [0.1, 2.5])
def test_sgd_learning_rate_decays_as_in_the_paper(r):
    model, cfg = nnlm(optimizer="sgd", lr=0.3, lr_decay=r)
    out = make_optimizer(model, cfg)
    opt = out["optimizer"]
    sched = out["lr_scheduler"]["scheduler"]
    assert out["lr_scheduler"]["interval"] == "step"
    assert isinstance(opt, torch.optim.SGD)
    assert all(g["lr"] == pytest.approx(0.3) for g in opt.param_groups)
    for t in range(1, 8):
        opt.step()
        sched.step()
        for g in opt.param_groups:
            assert g["lr"] == pytest.approx(0.3 / (1 + r * t), rel=1e-12), t


def test_no_scheduler_without_decay():
    model, cfg = nnlm(optimizer="sgd", lr=0.3, lr_decay=0.0)
    assert isinstance(make_optimizer(model, cfg), torch.optim.SGD)


def test_lr_decay_is_applied_per_step_inside_the_trainer(tmp_path):
    train, valid = stream(6, 5 * BATCH), stream(7, VALID_TOKENS)  # exactly 5 steps per epoch
    module = FamilyModule("nnlm", tiny_config(optimizer="sgd", lr=0.2, lr_decay=0.5), V, run="sgd")
    trainer = make_trainer(
        trainer_config(max_epochs=1), "sgd", tmp_path / "sgd.csv", tmp_path / "ckpt", None, seed=0
    )
    trainer.fit(module, loader(train, True), loader(valid, False))
    assert trainer.global_step == 5
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.2 / (1 + 0.5 * 5))


def test_adam_takes_betas_and_eps_from_the_config():
    model, cfg = nnlm(optimizer="adam", adam_beta1=0.8, adam_beta2=0.98, adam_eps=1e-9)
    opt = make_optimizer(model, cfg)
    assert [(g["betas"], g["eps"]) for g in opt.param_groups] == [((0.8, 0.98), 1e-9)] * 2


def test_every_adam_family_gets_its_config_betas_through_the_module():
    """The translation Transformer's default β₂ = 0.98 (Vaswani et al. §5.3), and a language
    model's when params say so, reach Adam."""
    from dataclasses import asdict

    from nlpzoo.families import FAMILIES

    for family, overrides, betas in (
        ("transformer", {"d_model": 8, "heads": 2, "d_ff": 8, "num_layers": 1}, (0.9, 0.98)),
        ("transformer_lm", {"d_model": 8, "heads": 2, "d_ff": 8, "adam_beta2": 0.98}, (0.9, 0.98)),
        ("nnlm", {"context_size": 2}, (0.9, 0.999)),
    ):
        cfg = FAMILIES[family].config(**overrides)
        out = FamilyModule(family, asdict(cfg), V).configure_optimizers()
        opt = out["optimizer"] if isinstance(out, dict) else out
        assert {g["betas"] for g in opt.param_groups} == {betas}, family
        assert {g["eps"] for g in opt.param_groups} == {cfg.adam_eps}, family


# ------------------------------------------------------- checkpoint writer and GPU determinism


@pytest.mark.parametrize(
    "strategy",
    ["auto", "ddp", "ddp_spawn", "ddp_fork", "ddp_notebook", "single_device"],
)
def test_local_checkpoint_writer_in_one_process_and_under_ddp(strategy):
    assert local_checkpoint_io(strategy)


@pytest.mark.parametrize(
    "strategy", ["fsdp", "fsdp_cpu_offload", "deepspeed", "deepspeed_stage_3", "xla", "single_xla"]
)
def test_no_checkpoint_plugin_for_strategies_with_their_own_writer(strategy):
    assert not local_checkpoint_io(strategy)


def test_checkpoint_writer_decided_from_strategy_objects():
    from pytorch_lightning.strategies import DDPStrategy, FSDPStrategy, SingleDeviceStrategy

    assert local_checkpoint_io(DDPStrategy())
    assert local_checkpoint_io(SingleDeviceStrategy(device=torch.device("cpu")))
    assert not local_checkpoint_io(FSDPStrategy())
    assert not local_checkpoint_io("auto", accelerator="tpu")


def test_make_trainer_passes_the_checkpoint_writer_only_when_it_applies(tmp_path, monkeypatch):
    from pytorch_lightning.plugins import TorchCheckpointIO

    from nlpzoo.training import LocalCheckpointIO

    trainer = make_trainer(trainer_config(), "tiny", tmp_path / "c.csv", tmp_path, None, seed=0)
    assert isinstance(trainer.strategy.checkpoint_io, LocalCheckpointIO)
    # a strategy with its own writer: make_trainer passes no plugin (Lightning's stays)
    seen = {}
    monkeypatch.setattr(
        "nlpzoo.training.trainer.pl.Trainer", lambda **kw: seen.update(kw) or "trainer"
    )
    make_trainer(trainer_config(strategy="fsdp"), "t", tmp_path / "c.csv", tmp_path, None, 0)
    assert seen["plugins"] is None
    make_trainer(trainer_config(strategy="ddp"), "t", tmp_path / "c.csv", tmp_path, None, 0)
    assert [type(p) for p in seen["plugins"]] == [LocalCheckpointIO]
    assert issubclass(LocalCheckpointIO, TorchCheckpointIO)


@pytest.fixture
def torch_determinism():
    """torch's global deterministic-algorithms state, put back after the test."""
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])


@pytest.mark.parametrize(
    "value, enabled, warn_only",
    [(True, True, False), ("warn", True, True), (False, False, False), ("auto", False, False)],
)
def test_deterministic_reaches_the_real_trainer_as_set(
    tmp_path, monkeypatch, torch_determinism, value, enabled, warn_only
):
    # the other state first, so that a value that never reached torch would show
    torch.use_deterministic_algorithms(not enabled, warn_only=not warn_only)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    cfg = trainer_config(accelerator="cpu", deterministic=value)
    trainer = make_trainer(cfg, "t", tmp_path / "c.csv", tmp_path, None, seed=0)
    assert isinstance(trainer, pl.Trainer)
    assert torch.are_deterministic_algorithms_enabled() is enabled
    if enabled:
        assert torch.is_deterministic_algorithms_warn_only_enabled() is warn_only
    # Lightning's own workspace setting, exactly when deterministic kernels are on
    assert os.environ.get("CUBLAS_WORKSPACE_CONFIG") == (":4096:8" if enabled else None)


def test_a_cublas_workspace_already_set_is_kept(tmp_path, monkeypatch, torch_determinism):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    cfg = trainer_config(accelerator="cpu", deterministic=True)
    make_trainer(cfg, "t", tmp_path / "c.csv", tmp_path, None, seed=0)
    assert torch.are_deterministic_algorithms_enabled()
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


@pytest.mark.parametrize(
    "accelerator, cuda, expected",
    [("cpu", True, False), ("gpu", False, "warn"), ("auto", True, "warn"), ("auto", False, False)],
)
def test_deterministic_auto_is_warn_on_a_gpu_and_false_on_the_cpu(
    tmp_path, monkeypatch, accelerator, cuda, expected
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    seen = {}
    monkeypatch.setattr(
        "nlpzoo.training.trainer.pl.Trainer", lambda **kw: seen.update(kw) or "trainer"
    )
    make_trainer(trainer_config(accelerator=accelerator), "t", tmp_path / "c", tmp_path, None, 0)
    assert seen["deterministic"] == expected and type(seen["deterministic"]) is type(expected)


@pytest.mark.parametrize("value", [True, False, "warn"])
def test_an_explicit_deterministic_is_kept_on_a_gpu(tmp_path, monkeypatch, value):
    seen = {}
    monkeypatch.setattr(
        "nlpzoo.training.trainer.pl.Trainer", lambda **kw: seen.update(kw) or "trainer"
    )
    cfg = trainer_config(accelerator="gpu", deterministic=value)
    make_trainer(cfg, "t", tmp_path / "c", tmp_path, None, 0)
    assert seen["deterministic"] is value


def test_deterministic_refuses_what_lightning_does_not_take():
    with pytest.raises(ConfigError, match=r"deterministic.*true, false, warn or auto"):
        trainer_config(deterministic="sometimes")


# ------------------------------------------------------------------------- learning-rate schedules


@dataclass
class Scheduled:
    schedule: str = "auto"
    warmup_steps: int = 0
    lr_decay: float = 0.0


def factors(cfg, total: int | None = None, steps: int = 12) -> list[float]:
    f = lr_factor(cfg, total)
    return [1.0 if f is None else f(t) for t in range(steps)]


def test_auto_schedule_is_the_families_own():
    assert lr_factor(Scheduled()) is None  # constant Adam
    assert factors(Scheduled(lr_decay=0.5), steps=3) == [1.0, 1 / 1.5, 1 / 2.0]
    warm = factors(Scheduled(warmup_steps=4))
    assert warm == factors(Scheduled("inverse_sqrt", warmup_steps=4))
    assert warm[:4] == [0.25, 0.5, 0.75, 1.0] and warm[8] == pytest.approx((4 / 9) ** 0.5)


def test_linear_and_cosine_warm_up_then_reach_zero_at_the_last_step():
    lin = factors(Scheduled("linear", warmup_steps=2), total=10, steps=11)
    assert lin[:2] == [0.5, 1.0]
    # after the warm-up: 1 − (t − 2) / 8, zero at step 10 and after
    assert lin[2:] == pytest.approx([1 - (t - 2) / 8 for t in range(2, 11)])
    cos = factors(Scheduled("cosine"), total=8, steps=9)
    assert cos == pytest.approx([0.5 * (1 + math.cos(math.pi * t / 8)) for t in range(9)])
    assert cos[4] == pytest.approx(0.5) and cos[8] == pytest.approx(0.0, abs=1e-12)
    assert factors(Scheduled("constant", warmup_steps=3), steps=5) == [1 / 3, 2 / 3, 1, 1, 1]
    with pytest.raises(ValueError, match="total number of steps"):
        lr_factor(Scheduled("linear"))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"schedule": "step"}, "schedule.*one of"),
        ({"schedule": "linear", "lr_decay": 0.1}, "lr_decay.*must be 0"),
    ],
)
def test_a_schedule_the_family_cannot_take_is_refused(kw, message):
    with pytest.raises(ConfigError, match=message):
        Config(**kw)


def test_inverse_sqrt_without_warm_up_is_refused():
    from nlpzoo.families.transformer_lm import TransformerLMConfig

    with pytest.raises(ConfigError, match="inverse_sqrt needs warmup_steps"):
        TransformerLMConfig(schedule="inverse_sqrt", warmup_steps=0)


def test_linear_schedule_inside_the_trainer_ends_at_zero(tmp_path):
    train, valid = stream(6, 5 * BATCH), stream(7, VALID_TOKENS)  # 5 steps per epoch, 10 in all
    module = FamilyModule("nnlm", tiny_config(lr=0.2, schedule="linear"), V, run="lin")
    trainer = make_trainer(
        trainer_config(max_epochs=2), "lin", tmp_path / "lin.csv", tmp_path / "ckpt", None, seed=0
    )
    trainer.fit(module, loader(train, True), loader(valid, False))
    assert trainer.global_step == 10
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)
    sched = trainer.lr_scheduler_configs[0].scheduler
    assert sched.last_epoch == 10  # stepped once per optimizer step, not per epoch
