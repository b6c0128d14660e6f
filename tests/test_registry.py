"""The register stage (nlpzoo.registry) and the MLflow model it logs (nlpzoo.serving): every run
of a toy project registered as nlpzoo-RUN, loaded through `mlflow.pyfunc` from outside the
project, answering as the commands answer; the champion alias on the best version; a store that
cannot register leaves the run as it was."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow.pyfunc
import pytest
import yaml
from mlflow import MlflowClient

from nlpzoo import lifecycle, registry
from nlpzoo.tracking import _process_tracking_uri
from nlpzoo.use.text import UseError
from test_use import cli
from toy import tiny_params, write_lm_data

RUNS = ("ngram", "lstm_lm", "svd")  # a count LM, a neural LM with embeddings, word vectors


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("registry")
    write_lm_data(root)
    params = tiny_params(*RUNS)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        mp.setenv("NLPZOO_MLFLOW_CACHE", str(root / "mlflow-cache"))
        for run in RUNS:
            lifecycle.train(params, run, root)
            lifecycle.evaluate(params, run, root)
            registry.register(params, run, root)
        yield root


def _uri(root: Path) -> str:
    return f"sqlite:///{root / 'mlflow.db'}"


def _load(root: Path, run: str):
    with _process_tracking_uri(_uri(root)):  # the process's URI is left as it was
        return mlflow.pyfunc.load_model(f"models:/{registry.model_name(run)}@champion")


def test_every_run_is_a_registered_version_with_its_tags_and_metrics(project):
    client = MlflowClient(tracking_uri=_uri(project))
    for run in RUNS:
        record = json.loads((project / "registry" / f"{run}.json").read_text())
        assert record["registered"] is True and record["version"] == 1
        metrics = json.loads((project / "metrics" / f"{run}.json").read_text())
        version = client.get_model_version_by_alias(registry.model_name(run), "champion")
        assert int(version.version) == 1
        assert version.run_id == metrics["mlflow_run_id"]  # the training's own MLflow run
        tags = version.tags
        assert tags["nlpzoo.run"] == run and len(tags["params_hash"]) == 12
        metric = record["metric"]
        assert float(tags[registry.METRIC_TAG + metric]) == pytest.approx(
            metrics[metric], nan_ok=True
        )


def test_pyfunc_answers_are_the_commands_answers(project):
    lm = _load(project, "lstm_lm")
    prompts = ["the cat", "she likes"]
    got = lm.predict(prompts, params={"tokens": 6, "seed": 3})
    for prompt, text in zip(prompts, got, strict=True):
        code, out, _ = cli(project, "generate", "--run", "lstm_lm", "--prompt", prompt,
                           "--tokens", "6", "--seed", "3")  # fmt: skip
        assert code == 0
        assert out.strip().split("\t")[1] == text

    lines = ["the cat sees a ball .", "he eats it ."]
    scored = lm.predict(lines, params={"mode": "score"})
    text = project / "lines.txt"
    text.write_text("\n".join(lines) + "\n")
    code, out, _ = cli(project, "score", "--run", "lstm_lm", "--separate", "--json", str(text))
    assert code == 0
    rows = json.loads(out)["lines"]
    assert [r["log_prob"] for r in scored] == pytest.approx([r["log_prob"] for r in rows])

    vectors = _load(project, "svd")
    found = vectors.predict(["cat", "dog"], params={"k": 3})
    code, out, _ = cli(project, "neighbours", "--run", "svd", "cat", "dog", "-k", "3", "--json")
    table = json.loads(out)["neighbours"]
    assert found == [table["cat"], table["dog"]]

    ngram = _load(project, "ngram")
    got = ngram.predict(["the cat"], params={"tokens": 5, "seed": 1})
    code, out, _ = cli(project, "generate", "--run", "ngram", "--prompt", "the cat",
                       "--tokens", "5", "--seed", "1")  # fmt: skip
    assert out.strip().split("\t")[1] == got[0]


def test_the_commands_take_a_registered_version(project):
    """`--mlflow-run models:/nlpzoo-RUN@ALIAS` and `models:/nlpzoo-RUN/VERSION`: the version's
    own model, downloaded once into the store's cache folder, answers as the run's folder."""
    from nlpzoo.tracking import _uri_key

    local = cli(project, "neighbours", "--run", "svd", "cat", "dog", "-k", "3")
    for ref in ("models:/nlpzoo-svd@champion", "models:/nlpzoo-svd/1"):
        assert cli(project, "neighbours", "--mlflow-run", ref, "cat", "dog", "-k", "3") == local
    args = ("generate", "--prompt", "the cat", "--tokens", "6", "--seed", "2")
    local = cli(project, *args, "--run", "lstm_lm")
    assert (
        local[0] == 0 and cli(project, *args, "--mlflow-run", "models:/nlpzoo-lstm_lm/1") == local
    )

    client = MlflowClient(tracking_uri=_uri(project))
    version = client.get_model_version(registry.model_name("svd"), "1")
    model_id = version.source.removeprefix("models:/")
    cached = project / "mlflow-cache" / _uri_key(_uri(project)) / model_id
    assert sorted(p.name for p in cached.iterdir()) == [
        "config.json",
        "model.npz",
        "train_stats.json",
        "vocab.txt",
    ]
    for ref, message in [
        ("models:/nlpzoo-svd/99", "models:/nlpzoo-svd/99 not found at sqlite:///"),
        ("models:/nlpzoo-svd@best", "models:/nlpzoo-svd@best not found at sqlite:///"),
        ("models:/nlpzoo-svd", "is not an MLflow run id, nor a registered model's version"),
    ]:
        code, out, err = cli(project, "neighbours", "--mlflow-run", ref, "cat")
        assert code == 1 and out == "" and err.count("\n") == 1, err
        assert err.startswith("error: ") and message in err, err


@pytest.mark.parametrize(
    "inputs, params, message",
    [
        ([""], {}, "input 0 is an empty string"),
        ([3], {}, "not a string"),
        (["a"] * 1001, {}, "at most 1,000 lines"),
        (["the cat"], {"mode": "sing"}, "unknown mode 'sing'"),
        (["the cat"], {"tokens": 0}, "param 'tokens' is at least 1"),
    ],
)
def test_bad_requests_are_one_clear_error(project, inputs, params, message):
    model = _load(project, "lstm_lm").unwrap_python_model()
    with pytest.raises(UseError, match=message):
        model.predict(None, inputs, params)


def test_a_new_version_takes_the_champion_alias_only_when_better(project, monkeypatch):
    params = yaml.safe_load((project / "params.yaml").read_text())
    metrics_path = project / "metrics" / "svd.json"
    saved = metrics_path.read_text()
    metrics = json.loads(saved)
    try:  # the toy's first version has no WS-353 score (NaN): any score beats it
        metrics_path.write_text(json.dumps({**metrics, "ws353_rho": 0.1}))
        assert registry.register(params, "svd", project)["champion"] == 2
        metrics_path.write_text(json.dumps({**metrics, "ws353_rho": 0.05}))
        assert registry.register(params, "svd", project)["champion"] == 2
        metrics_path.write_text(json.dumps({**metrics, "ws353_rho": 0.3}))
        record = registry.register(params, "svd", project)
        assert record["version"] == 4 and record["champion"] == 4
    finally:
        metrics_path.write_text(saved)


def test_an_unreachable_store_leaves_the_run_intact_in_one_warning(project, monkeypatch, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    params = yaml.safe_load((project / "params.yaml").read_text())
    before = {p: p.read_bytes() for p in (project / "models" / "ngram").iterdir()}
    with pytest.warns(RuntimeWarning, match="not registered in MLflow") as caught:
        record = registry.register(params, "ngram", project)
    assert len(caught) == 1 and "\n" not in str(caught[0].message)
    assert str(caught[0].message).startswith(
        f"run 'ngram' not registered in MLflow: MLflow tracking server unreachable at "
        f"http://127.0.0.1:{port} (connection refused; 5 tries); its files and metrics are intact"
    )
    assert record["registered"] is False and record["logged"] is False
    assert {p: p.read_bytes() for p in (project / "models" / "ngram").iterdir()} == before
    # and the record of the earlier registration is replaced by this one's
    assert json.loads((project / "registry" / "ngram.json").read_text())["registered"] is False


def test_the_model_loads_and_answers_without_the_project(project, tmp_path):
    """A copy of the model folder, loaded by a Python that cannot import the project's
    nlpzoo (its working directory and path hold no checkout): the packaged code answers."""
    client = MlflowClient(tracking_uri=_uri(project))
    version = client.get_model_version_by_alias(registry.model_name("svd"), "champion")
    with _process_tracking_uri(_uri(project)):
        local = Path(
            mlflow.artifacts.download_artifacts(version.source, dst_path=str(tmp_path / "m"))
        )
    away = tmp_path / "away"
    away.mkdir()
    # every folder of the path that holds a package nlpzoo (this checkout, an editable install
    # of another), the working directory too
    script = (
        "import sys, json, importlib.util, os\n"
        "sys.path = [p for p in sys.path if p not in ('', '.') and not os.path.isdir("
        "os.path.join(p, 'nlpzoo'))]\n"
        "assert importlib.util.find_spec('nlpzoo') is None\n"
        "import mlflow.pyfunc\n"
        f"m = mlflow.pyfunc.load_model({str(local)!r})\n"
        "print(json.dumps(m.predict(['cat'], params={'k': 2})))\n"
        "import nlpzoo; print(nlpzoo.__file__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=away, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    answer, origin = out.stdout.strip().splitlines()[-2:]
    assert str(local) in origin  # the model's own copy of the package
    _, cli_out, _ = cli(project, "neighbours", "--run", "svd", "cat", "-k", "2", "--json")
    assert json.loads(answer) == [json.loads(cli_out)["neighbours"]["cat"]]
    shutil.rmtree(local)


def test_a_translation_run_serves_the_translate_commands_answers(tmp_path, monkeypatch, capsys):
    from nlpzoo.__main__ import main
    from test_lifecycle_mt import _tiny_params, make_mt_project

    root = make_mt_project(tmp_path / "mt")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", _uri(root))
    params = _tiny_params("transformer")
    lifecycle.train(params, "transformer", root)
    lifecycle.evaluate(params, "transformer", root)
    record = registry.register(params, "transformer", root)
    assert record["registered"] is True and record["metric"] == "bleu_beam"
    model = _load(root, "transformer")
    lines = ["der hund katze haus", "der baum rot"]
    source = tmp_path / "src.txt"
    source.write_text("\n".join(lines) + "\n")
    for beam in (1, 3):
        got = model.predict(lines, params={"beam_size": beam})
        argv = ["translate", "--run", "transformer", "--models", str(root / "models")]
        assert main([*argv, "--beam", str(beam), str(source)]) == 0
        assert capsys.readouterr().out.splitlines() == got
    too_long = " ".join(["hund"] * 400)
    with pytest.raises(UseError, match="cannot translate this input"):
        model.unwrap_python_model().predict(None, [too_long], {})
