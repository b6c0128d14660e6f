"""The register stage (nlpzoo.registry) and the MLflow model it logs (nlpzoo.serving): every run
of a toy project registered as nlpzoo-RUN, loaded through `mlflow.pyfunc` from outside the
project and served by `mlflow models serve`, answering as the commands answer, bad requests
refused in one line; the champion alias on the best version; a store that cannot register
leaves the run as it was."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import mlflow.pyfunc
import pytest
import requests
import yaml
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from test_tracking import free_port

from nlpzoo import lifecycle, registry
from nlpzoo.__main__ import main
from nlpzoo.tracking import process_tracking_uri
from projects import cli, make_mt_project, tiny_mt_params, trained
from toy import tiny_params, write_lm_data

RUNS = ("ngram", "lstm_lm", "svd")  # a count LM, a neural LM with embeddings, word vectors


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("registry")
    write_lm_data(root)
    params = tiny_params(*RUNS)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    with trained(root, params, RUNS, register=True):
        yield root


def _uri(root: Path) -> str:
    return f"sqlite:///{root / 'mlflow.db'}"


def _load(root: Path, run: str):
    with process_tracking_uri(_uri(root)):  # the process's URI is left as it was
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
    from nlpzoo.tracking import uri_key

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
    cached = project / "mlflow-cache" / uri_key(_uri(project)) / model_id
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


def test_the_model_loads_the_runs_files_when_it_is_loaded(project):
    """A served model is ready when it answers /ping: no request waits for the weights."""
    for run, loaded in [("lstm_lm", {"model", "vocab", "vectors"}), ("svd", {"vectors"})]:
        answerer = _load(project, run).unwrap_python_model().answerer
        assert loaded <= set(vars(answerer)), sorted(vars(answerer))


@pytest.mark.parametrize(
    "inputs, params, message",
    [
        ([""], {}, "input 0 is an empty string"),
        ([3], {}, "not a string"),
        (["a"] * 65, {}, "lines per request: at most 64 (NLPZOO_MAX_INPUTS), got 65"),
        (["the cat"], {"mode": "sing"}, "unknown mode 'sing'"),
        (["the cat"], {"tokens": 0}, "param 'tokens' is at least 1"),
        (["the cat"], {"tokens": "many"}, "param 'tokens' is a whole number, got 'many'"),
        (["the cat"], {"tokens": 2.0}, "param 'tokens' is a whole number, got 2.0"),
        (["the cat"], {"seed": -1}, "param 'seed' is at least 0, got -1"),
        (["the cat"], {"tokenz": 3}, "unknown param 'tokenz'; did you mean 'tokens'?"),
        (["the cat"], {"tokens": 1001}, "param 'tokens': at most 1,000 (NLPZOO_MAX_TOKENS)"),
    ],
)
def test_bad_requests_are_one_clear_error(project, inputs, params, message):
    model = _load(project, "lstm_lm")
    # the model's own copy of nlpzoo.serving.BadRequest (models from code): an MlflowException
    with pytest.raises(MlflowException, match=re.escape(message)) as caught:
        model.predict(inputs, params)
    assert type(caught.value).__name__ == "BadRequest"
    assert caught.value.error_code == "INVALID_PARAMETER_VALUE"
    assert json.loads(caught.value.serialize_as_json())["message"] == str(caught.value)


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
    metrics = (project / "metrics" / "ngram.json").read_bytes()
    with pytest.warns(RuntimeWarning, match="not registered in MLflow") as caught:
        record = registry.register(params, "ngram", project)
    assert len(caught) == 1 and "\n" not in str(caught[0].message)
    assert str(caught[0].message).startswith(
        f"run 'ngram' not registered in MLflow: MLflow tracking server unreachable at "
        f"http://127.0.0.1:{port} (connection refused; 5 tries); its files and metrics are intact"
    )
    assert record["registered"] is False and record["logged"] is False
    assert {p: p.read_bytes() for p in (project / "models" / "ngram").iterdir()} == before
    assert (project / "metrics" / "ngram.json").read_bytes() == metrics
    # and the record of the earlier registration is replaced by this one's
    assert json.loads((project / "registry" / "ngram.json").read_text())["registered"] is False


def test_the_model_loads_and_answers_without_the_project(project, tmp_path):
    """A copy of the model folder, loaded by a Python that cannot import the project's
    nlpzoo (its working directory and path hold no checkout): the packaged code answers."""
    client = MlflowClient(tracking_uri=_uri(project))
    version = client.get_model_version_by_alias(registry.model_name("svd"), "champion")
    with process_tracking_uri(_uri(project)):
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


def _versions(client: MlflowClient, run: str) -> dict[int, dict[str, str]]:
    found = client.search_model_versions(f"name='{registry.model_name(run)}'")
    return {int(v.version): v.tags for v in found}


def _champion_ppl(client: MlflowClient, run: str) -> float:
    version = client.get_model_version_by_alias(registry.model_name(run), "champion")
    return float(version.tags[registry.METRIC_TAG + "test_ppl"])


@pytest.mark.parametrize(
    "method, done",
    [
        ("create_model_version", True),  # the version is made and the answer lost
        ("set_logged_model_tags", False),
        ("set_registered_model_alias", False),
        ("get_registered_model", False),
    ],
)
def test_a_store_hiccup_mid_registration_retries_it_whole(project, monkeypatch, method, done):
    """A "database is locked" on any call after the version is made: the registration is
    tried again as a whole, and ends with one new version, tagged, the champion alias moved
    to it, and `registered: true`."""
    client = MlflowClient(tracking_uri=_uri(project))
    params = yaml.safe_load((project / "params.yaml").read_text())
    metrics_path = project / "metrics" / "ngram.json"
    saved = metrics_path.read_text()
    ppl = _champion_ppl(client, "ngram") / 2  # better than the champion: the alias moves
    before = _versions(client, "ngram")
    real = getattr(MlflowClient, method)
    failed = []

    def flaky(self, *args, **kwargs):
        if not failed and (method != "get_registered_model" or args[0].startswith("nlpzoo-")):
            failed.append(method)
            if done:
                real(self, *args, **kwargs)
            raise MlflowException("(sqlite3.OperationalError) database is locked")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, method, flaky)
    try:
        metrics_path.write_text(json.dumps({**json.loads(saved), "test_ppl": ppl}))
        record = registry.register(params, "ngram", project)
    finally:
        metrics_path.write_text(saved)
    assert failed == [method]
    after = _versions(client, "ngram")
    assert sorted(set(after) - set(before)) == [record["version"]]
    tags = after[record["version"]]
    assert tags[registry.METRIC_TAG + "test_ppl"] == str(ppl) and tags["nlpzoo.run"] == "ngram"
    assert record["registered"] is True and record["champion"] == record["version"]
    written = json.loads((project / "registry" / "ngram.json").read_text())
    assert written["registered"] is True and written["version"] == record["version"]
    version = client.get_model_version_by_alias(registry.model_name("ngram"), "champion")
    assert int(version.version) == record["version"]
    linked = json.loads(
        client.get_logged_model(version.source[len("models:/") :]).tags["mlflow.modelVersions"]
    )
    assert linked.count({"name": "nlpzoo-ngram", "version": record["version"]}) == 1


def test_registering_again_with_nothing_changed_is_the_same_version(project):
    client = MlflowClient(tracking_uri=_uri(project))
    params = yaml.safe_load((project / "params.yaml").read_text())
    first = registry.register(params, "ngram", project)
    versions = _versions(client, "ngram")
    again = registry.register(params, "ngram", project)
    assert again["version"] == first["version"] and again["champion"] == first["champion"]
    assert _versions(client, "ngram") == versions


def test_two_registrations_at_once_leave_the_champion_on_the_better(project, monkeypatch):
    """Two registrations of one run racing (`dvc queue start -j 2`): the worse one has chosen
    its champion (itself) and sets the alias only after the better one has registered and set
    it; the alias ends on the better version."""
    import threading

    from nlpzoo.tasks import Run

    client = MlflowClient(tracking_uri=_uri(project))
    params = yaml.safe_load((project / "params.yaml").read_text())
    run = Run.of(params, "ngram", project)
    metrics = json.loads((project / "metrics" / "ngram.json").read_text())
    ppl = _champion_ppl(client, "ngram")
    real = MlflowClient.set_registered_model_alias
    chosen, better_set = threading.Event(), threading.Event()

    def slow(self, name, alias, version):
        who = threading.current_thread().name
        if who == "worse" and not chosen.is_set():
            chosen.set()
            # unguarded, the better one sets the alias now, and this one after it; under a
            # lock, the better one waits for this one instead
            better_set.wait(timeout=3)
        result = real(self, name, alias, version)
        if who == "better":
            better_set.set()
        return result

    monkeypatch.setattr(MlflowClient, "set_registered_model_alias", slow)
    results: dict[str, dict] = {}
    errors: list[BaseException] = []

    def publish(key: str, value: float, wait: bool) -> None:
        try:
            if wait:
                chosen.wait(timeout=60)
            results[key] = registry._publish(
                run, {**metrics, "test_ppl": value}, "test_ppl", False, params, True
            )
        except BaseException as err:
            errors.append(err)

    threads = [
        threading.Thread(target=publish, name="worse", args=("worse", ppl / 2, False)),
        threading.Thread(target=publish, name="better", args=("better", ppl / 4, True)),
    ]
    with process_tracking_uri(_uri(project)):  # the threads restore this process's URI
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    assert not errors, errors
    assert chosen.is_set()
    better = results["better"]["version"]
    assert results["worse"]["version"] != better
    version = client.get_model_version_by_alias(registry.model_name("ngram"), "champion")
    assert int(version.version) == better and results["better"]["champion"] == better


@pytest.fixture(scope="module")
def mt_project(tmp_path_factory):
    """A toy translation project whose `transformer` run is trained, evaluated and registered
    (its own store)."""
    root = make_mt_project(tmp_path_factory.mktemp("registry-mt") / "mt")
    params = tiny_mt_params("transformer")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", _uri(root))
        lifecycle.train(params, "transformer", root)
        lifecycle.evaluate(params, "transformer", root)
        record = registry.register(params, "transformer", root)
    assert record["registered"] is True and record["metric"] == "bleu_beam"
    return root


def _translate(root: Path, lines: list[str], beam: int, capsys) -> list[str]:
    """`python -m nlpzoo translate --run transformer --beam BEAM` of `lines`."""
    source = root / "src.txt"
    source.write_text("\n".join(lines) + "\n")
    argv = ["translate", "--run", "transformer", "--models", str(root / "models")]
    capsys.readouterr()
    assert main([*argv, "--beam", str(beam), str(source)]) == 0
    return capsys.readouterr().out.splitlines()


def test_a_translation_run_serves_the_translate_commands_answers(mt_project, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", _uri(mt_project))
    model = _load(mt_project, "transformer")
    lines = ["der hund katze haus", "der baum rot"]
    for beam in (1, 3):
        got = model.predict(lines, params={"beam_size": beam})
        assert _translate(mt_project, lines, beam, capsys) == got
    too_long = " ".join(["hund"] * 400)
    with pytest.raises(MlflowException, match="cannot translate this input"):
        model.predict([too_long])


def test_a_served_model_imports_only_what_its_requirements_install(project, mt_project):
    """Each task's champion loaded in a fresh Python and asked every mode: each third-party
    module its code imports is installed by the model's own requirements.txt, which is what
    `mlflow models serve` installs in a fresh environment (its default env manager)."""
    from test_requirements import imported_by_package, uncovered

    lm, mt = _uri(project), _uri(mt_project)
    cases = [
        (lm, "ngram", ["the cat"], {"tokens": 3, "seed": 1}),
        (lm, "lstm_lm", ["the cat"], {"tokens": 3, "seed": 1}),
        (lm, "lstm_lm", ["the cat sees a ball ."], {"mode": "score"}),
        (lm, "lstm_lm", ["cat"], {"mode": "neighbours", "k": 2}),
        (lm, "svd", ["cat"], {"k": 2}),
        (lm, "svd", ["cat dog ball"], {"mode": "analogy", "k": 2}),
        (mt, "transformer", ["der hund katze haus"], {"beam_size": 2}),
    ]
    script = (
        "import mlflow, mlflow.pyfunc\n"
        "for uri, run, inputs, params in json.loads(sys.argv[1]):\n"
        "    mlflow.set_tracking_uri(uri)\n"
        "    model = mlflow.pyfunc.load_model(f'models:/nlpzoo-{run}@champion')\n"
        "    assert model.predict(inputs, params=params)\n"
    )
    modules = imported_by_package(script, json.dumps(cases))
    assert {"torch", "pytorch_lightning", "sentencepiece", "mlflow"} <= set(modules)
    for root, run in [(project, "lstm_lm"), (project, "svd"), (mt_project, "transformer")]:
        with process_tracking_uri(_uri(root)):
            path = mlflow.pyfunc.get_model_dependencies(
                f"models:/{registry.model_name(run)}@champion"
            )
        logged = Path(path).read_text().splitlines()
        assert set(registry.requirements()) <= set(logged), logged
        assert uncovered(modules, logged) == {}, run


# ------------------------------------------------------------------ mlflow models serve

MLFLOW = Path(sys.executable).with_name("mlflow")
SERVE_DEADLINE_S = 60.0  # every server answers /ping within this (they start side by side)


@contextlib.contextmanager
def _served(models: dict[str, tuple[Path, str]], logs: Path) -> Iterator[dict[str, str]]:
    """`mlflow models serve` of each {key: (project, model URI)} on a free port of 127.0.0.1,
    each in its own process group, started side by side; yields {key: base URL} once every
    one answers /ping, and kills every group at the end."""
    running: dict[str, tuple[subprocess.Popen, str, Path]] = {}
    try:
        for key, (root, uri) in models.items():
            port = free_port()
            log = logs / f"serve-{key}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [str(MLFLOW), "models", "serve", "-m", uri, "--env-manager", "local",
                     "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                    env={**os.environ, "MLFLOW_TRACKING_URI": _uri(root)},
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )  # fmt: skip
            running[key] = (proc, f"http://127.0.0.1:{port}", log)
        deadline = time.monotonic() + SERVE_DEADLINE_S
        for key, (proc, url, log) in running.items():
            while True:
                if proc.poll() is not None:
                    pytest.fail(
                        f"server of {key} exited ({proc.returncode}): {log.read_text()[-3000:]}"
                    )
                with contextlib.suppress(requests.RequestException):
                    if requests.get(f"{url}/ping", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"server of {key} not up in {SERVE_DEADLINE_S:.0f} s: "
                        + log.read_text()[-3000:]
                    )
                time.sleep(0.2)
        yield {key: url for key, (_, url, _) in running.items()}
    finally:
        for proc, _, _ in running.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, _, _ in running.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
            with contextlib.suppress(ProcessLookupError):  # the workers of a group whose
                os.killpg(proc.pid, signal.SIGKILL)  # leader is gone


def _ask(url: str, inputs, params: dict | None = None) -> requests.Response:
    body = {"inputs": inputs} if params is None else {"inputs": inputs, "params": params}
    return requests.post(f"{url}/invocations", json=body, timeout=30)


def _answer(url: str, inputs, params: dict | None = None):
    response = _ask(url, inputs, params)
    assert response.status_code == 200, response.text[:2000]
    return response.json()["predictions"]


def _refused(url: str, inputs, params: dict | None, message: str, body: bytes = b"") -> None:
    """A bad request (`body`, when given, sent as it is): HTTP 400 and one line naming what is
    wrong, nothing else."""
    if body:
        response = requests.post(
            f"{url}/invocations", data=body, timeout=30,
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
    else:
        response = _ask(url, inputs, params)
    assert response.status_code == 400, response.text[:2000]
    body = response.json()
    assert body["error_code"] == "INVALID_PARAMETER_VALUE" and set(body) == {
        "error_code",
        "message",
    }, response.text[:2000]
    assert message in body["message"] and "\n" not in body["message"], body["message"]
    assert len(response.content) < 1000 and "Traceback" not in response.text


def test_mlflow_models_serve_answers_as_the_commands(project, mt_project, tmp_path, capsys):
    """A language model, a word-vector run and a translation run, each served from the
    registry by `mlflow models serve` (its champion version): the answers are the commands'
    for the same run and settings; bad requests are refused in one line and the server answers
    a good request after them."""
    models = {
        "lstm_lm": (project, "models:/nlpzoo-lstm_lm@champion"),
        "svd": (project, "models:/nlpzoo-svd@champion"),
        "transformer": (mt_project, "models:/nlpzoo-transformer@champion"),
    }
    with _served(models, tmp_path) as url:
        prompts = ["the cat", "she likes"]
        generated = _answer(url["lstm_lm"], prompts, {"tokens": 6, "seed": 3})
        for prompt, text in zip(prompts, generated, strict=True):
            code, out, _ = cli(project, "generate", "--run", "lstm_lm", "--prompt", prompt,
                               "--tokens", "6", "--seed", "3")  # fmt: skip
            assert code == 0 and out.strip().split("\t")[1] == text
        lines = ["the cat sees a ball .", "he eats it ."]
        scored = _answer(url["lstm_lm"], lines, {"mode": "score"})
        (tmp_path / "lines.txt").write_text("\n".join(lines) + "\n")
        code, out, _ = cli(
            project,
            "score",
            "--run",
            "lstm_lm",
            "--separate",
            "--json",
            str(tmp_path / "lines.txt"),
        )
        rows = json.loads(out)["lines"]
        assert [r["log_prob"] for r in scored] == pytest.approx([r["log_prob"] for r in rows])

        found = _answer(url["svd"], ["cat", "dog"], {"k": 3})
        _, out, _ = cli(project, "neighbours", "--run", "svd", "cat", "dog", "-k", "3", "--json")
        table = json.loads(out)["neighbours"]
        assert found == [table["cat"], table["dog"]]

        sentences = ["der hund katze haus", "der baum rot"]
        for beam in (1, 3):
            translated = _answer(url["transformer"], sentences, {"beam_size": beam})
            assert translated == _translate(mt_project, sentences, beam, capsys)

        lm, vectors, mt = url["lstm_lm"], url["svd"], url["transformer"]
        _refused(lm, [3], None, "input 0 is int, not a string")
        _refused(lm, ["the cat", None], None, "input 1 is NoneType, not a string")
        _refused(lm, ["the cat", 3], None, "input 1 is int, not a string")  # not read as "3"
        _refused(lm, {"text": "the cat"}, None, "the input is a list of strings, got dict")
        _refused(lm, [["the", "cat"]], None, "input 0 is list, not a string")
        _refused(lm, ["the cat", "  "], None, "input 1 is an empty string")
        _refused(lm, ["the cat"] * 10_000, None, "lines per request: at most 64 (NLPZOO_MAX_")
        _refused(lm, ["the cat"], {"tokens": 0}, "param 'tokens' is at least 1")
        _refused(lm, ["the cat"] * 10, {"tokens": 500}, "tokens per request (prompts × tokens)")
        _refused(lm, ["the cat"], {"mode": "sing"}, "unknown mode 'sing'")
        _refused(lm, ["the cat"], {"tokens": "many"}, "param 'tokens' is a whole number")
        _refused(lm, ["the cat"], {"seed": -1}, "param 'seed' is at least 0, got -1")
        _refused(lm, ["the cat"], {"tokenz": 3}, "unknown param 'tokenz'; did you mean 'tokens'?")
        _refused(lm, None, None, "the request body is not JSON", b'{"inputs": ["the cat"')
        _refused(vectors, ["zyzzyva"], None, "word 'zyzzyva' is not in the vocabulary of run 'svd'")
        _refused(mt, [" ".join(["hund"] * 400)], None, "cannot translate this input")
        _refused(mt, ["der hund"], {"beam_size": 1000}, "beam size: at most 16 (NLPZOO_MAX_BEAM)")
        _refused(mt, ["der hund"], {"beam_size": 2, "length_penalty": 5000}, "is at most 10")
        # and each server still answers, the same as before
        assert _answer(lm, prompts, {"tokens": 6, "seed": 3}) == generated
        assert _answer(vectors, ["cat", "dog"], {"k": 3}) == found
        assert _answer(mt, sentences, {"beam_size": 3}) == translated
