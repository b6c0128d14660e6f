"""The commands that use a trained run (nlpzoo.use): generate, score, neighbours, analogy, on
toy runs trained through the lifecycle in a temporary project, and on
planted vectors whose answers are known."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from nlpzoo import registry, use
from nlpzoo.__main__ import main
from nlpzoo.data.vocab import Vocab
from nlpzoo.evaluation.analogy import Analogies, _answers
from nlpzoo.evaluation.vectors import case_key, restricted_vocab, unit_rows, write_word2vec_text
from nlpzoo.families import FAMILIES
from toy import PARAMS, cli, tiny_params, trained, write_lm_data

LM_RUNS = ("ngram", "nnlm", "lstm_lm", "transformer_lm")  # one per input kind of the registry
TRAINED = (*LM_RUNS, "svd")
EVALUATION = {
    "sample_prompt": "The cat",
    "sample_tokens": 20,  # beyond the toy Transformer's block of 16: its window slides
    "sample_count": 2,
    "sample_seed": 7,
    "analogies": ["cat dog ball bread", "she he likes zyzzyva", "zyzzyva cat dog ball"],
}


def _params() -> dict:
    params = tiny_params(*TRAINED)
    params["evaluation"] = {**(params.get("evaluation") or {}), **EVALUATION}
    return params


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project whose params.yaml has every run of the real one; the runs of TRAINED trained
    and evaluated on a toy grammar; `planted` (vectors.txt only) and `fake_mt` (a translation
    run's config.json) beside them."""
    root = tmp_path_factory.mktemp("use")
    write_lm_data(root)
    params = _params()
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    _planted(root)
    fake = root / "models" / "fake_mt"
    fake.mkdir(parents=True)
    (fake / "config.json").write_text(
        json.dumps({"run": "fake_mt", "family": "transformer", "data": "vocab/mt"})
    )
    (fake / "model.pt").write_bytes(b"")
    with trained(root, params, TRAINED):
        yield root


# --------------------------------------------------------------------------- generate


@pytest.mark.parametrize("run", LM_RUNS)
def test_generate_reads_the_prompt_as_the_corpus_and_is_seeded(project, run):
    args = ("generate", "--run", run, "--prompt", "The CAT zyzzyva", "--tokens", "12")
    code, out, err = cli(project, *args, "--seed", "3", "--samples", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2
    words = set(Vocab.load(project / "data" / "vocab" / "lm" / "vocab.txt").words)
    for line in lines:
        prompt, text = line.split("\t")
        assert prompt == "the cat <unk>"  # lowercased as the corpus, the unknown word shown
        assert len(text.split()) == 12 and set(text.split()) <= words - {"<s>", "<pad>"}
    assert "zyzzyva" in err and "<unk>" in err  # the note names the word read as <unk>
    assert cli(project, *args, "--seed", "3", "--samples", "2")[1] == out
    # sample 1 does not depend on how many samples are drawn after it
    assert cli(project, *args, "--seed", "3")[1] == lines[0] + "\n"
    assert cli(project, *args, "--seed", "4", "--samples", "2")[1] != out
    code, js, _ = cli(project, *args, "--seed", "3", "--samples", "2", "--json")
    record = json.loads(js)
    assert record["run"] == run and record["unknown"] == ["zyzzyva"]
    assert [s["text"] for s in record["samples"]] == [line.split("\t")[1] for line in lines]
    assert record["tokens_per_second"] > 0 and record["first_token_seconds"] >= 0


def test_evaluation_writes_the_same_samples_for_every_lm_run(project):
    prompts = set()
    for run in LM_RUNS:
        record = json.loads((project / "eval" / run / "samples.json").read_text())
        prompts.add(tuple(record["prompt_tokens"]))
        assert len(record["samples"]) == 2
        assert all(len(s["text"].split()) == 20 for s in record["samples"])
        assert "tokens_per_second" not in record  # eval/ depends on the params only
        # the command with the same settings writes the same text
        _, out, _ = cli(
            project,
            "generate",
            "--run",
            run,
            "--prompt",
            "The cat",
            "--tokens",
            "20",
            "--samples",
            "2",
            "--seed",
            "7",
            "--json",
        )
        assert [s["text"] for s in json.loads(out)["samples"]] == [
            s["text"] for s in record["samples"]
        ]
    assert prompts == {("the", "cat")}


# --------------------------------------------------------------------------- score


@pytest.mark.parametrize("run", LM_RUNS)
def test_score_of_the_test_split_is_the_runs_test_ppl(project, run):
    test_txt = project / "data" / "prepared" / "lm" / "test.txt"
    code, out, err = cli(project, "score", "--run", run, str(test_txt), "--json")
    assert code == 0, err
    result = json.loads(out)
    metrics = json.loads((project / "metrics" / f"{run}.json").read_text())
    assert result["total"]["ppl"] == pytest.approx(metrics["test_ppl"], abs=6e-5)
    assert result["total"]["tokens"] == metrics["test_tokens"]
    assert len(result["lines"]) == 100
    lp = np.load(project / "eval" / run / "logprobs.npz")["test"].astype(np.float64)
    assert sum(r["log_prob"] for r in result["lines"]) == pytest.approx(lp.sum(), abs=0.05)
    first = result["lines"][0]
    assert first["tokens"] == len(first["text"].split()) + 1  # the words and the </s>
    # the text form: one row per sentence, then the total
    code, text, _ = cli(project, "score", "--run", run, str(test_txt))
    rows = [line.split("\t") for line in text.splitlines()]
    assert len(rows) == 101 and all(len(r) == 5 for r in rows)
    assert rows[-1][0] == "total" and float(rows[-1][3]) == pytest.approx(
        metrics["test_ppl"], abs=1e-3
    )


def test_score_reads_stdin_skips_empty_lines_and_scores_lines_separately(project):
    text = "The cat sees a ball .\n\n   \nhe eats zyzzyva .\n"
    code, out, err = cli(project, "score", "--run", "nnlm", "--json", stdin=text)
    assert code == 0, err
    result = json.loads(out)
    assert [r["line"] for r in result["lines"]] == [1, 4]
    assert [r["text"] for r in result["lines"]] == ["the cat sees a ball .", "he eats <unk> ."]
    assert result["lines"][1]["unknown"] == ["zyzzyva"] and "<unk>" in err
    assert result["total"]["tokens"] == 7 + 5
    # the n-gram's contexts stop at a sentence end: in order or separately, the same scores
    both = [
        json.loads(cli(project, "score", "--run", "ngram", "--json", *extra, stdin=text)[1])
        for extra in ((), ("--separate",))
    ]
    assert [r["log_prob"] for r in both[0]["lines"]] == pytest.approx(
        [r["log_prob"] for r in both[1]["lines"]]
    )
    # the NNLM's window reaches into the previous sentence unless the line stands alone
    alone = json.loads(
        cli(project, "score", "--run", "nnlm", "--json", "--separate", stdin=text)[1]
    )
    assert alone["lines"][0]["log_prob"] == pytest.approx(result["lines"][0]["log_prob"])
    assert alone["lines"][1]["log_prob"] != pytest.approx(result["lines"][1]["log_prob"])


# --------------------------------------------------------------------------- vectors

PLANTED_WORDS = ["man", "woman", "king", "queen", "paris", "france", "london", "england"]


def _planted_vectors() -> tuple[list[str], np.ndarray]:
    """Exact offsets (woman − man = queen − king; france − paris = england − london) plus
    random filler words."""
    rng = np.random.default_rng(3)
    e = np.eye(20)  # wide enough that no random filler word comes close to a planted answer
    table = {
        "man": e[0],
        "woman": e[0] + e[1],
        "king": e[0] + e[2],
        "queen": e[0] + e[1] + e[2],
        "paris": e[3],
        "france": e[3] + e[4],
        "london": e[3] + e[5],
        "england": e[3] + e[4] + e[5],
    }
    words = ["<unk>", "<s>", "</s>", "<pad>", *PLANTED_WORDS] + [f"w{i}" for i in range(40)]
    vectors = np.vstack(
        [rng.normal(size=(4, 20)), [table[w] for w in PLANTED_WORDS], rng.normal(size=(40, 20))]
    )
    return words, vectors


def _planted(root: Path) -> None:
    folder = root / "models" / "planted"
    folder.mkdir(parents=True)
    words, vectors = _planted_vectors()
    write_word2vec_text(folder / "vectors.txt", words, vectors)
    config = {"run": "planted", "family": "svd", "data": "cooccur", "vocab_size": len(words)}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.npz").write_bytes(b"")  # never read: vectors.txt is


def _brute_force(words, vectors, a, b, c, method):
    """Both methods written out, over every non-special word but a, b and c."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    at = {w: i for i, w in enumerate(words)}
    cos = unit @ unit[[at[a], at[b], at[c]]].T  # (V, 3)
    if method == "3cosadd":
        q = unit[at[b]] - unit[at[a]] + unit[at[c]]
        score = unit @ (q / np.linalg.norm(q))
    else:
        s = (cos + 1) / 2
        score = s[:, 1] * s[:, 2] / (s[:, 0] + 0.001)
    candidates = [i for i, w in enumerate(words) if not w.startswith("<") and w not in (a, b, c)]
    best = sorted(candidates, key=lambda i: (-score[i], i))
    return [(words[i], float(score[i])) for i in best]


@pytest.mark.parametrize("method", ["3cosadd", "3cosmul"])
def test_analogy_on_planted_vectors(project, method):
    words, vectors = _planted_vectors()
    for a, b, c, d in (("man", "woman", "king", "queen"), ("paris", "france", "london", "england")):
        code, out, err = cli(project, "analogy", "--run", "planted", a, b, c, "--method", method)
        assert code == 0, err
        assert out.split("\t")[0] == d
        code, out, _ = cli(
            project, "analogy", "--run", "planted", a, b, c, "--method", method, "-k", "6"
        )
        rows = [line.split("\t") for line in out.splitlines()]
        expected = _brute_force(words, vectors, a, b, c, method)[:6]
        assert [r[0] for r in rows] == [w for w, _ in expected]
        assert [float(r[1]) for r in rows] == pytest.approx([s for _, s in expected], abs=1e-4)
    # upper case is read as the vocabulary spells it; --json for machines
    code, out, _ = cli(
        project, "analogy", "--run", "planted", "MAN", "Woman", "king", "--json", "-k", "2"
    )
    result = json.loads(out)
    assert result["question"] == ["man", "woman", "king"] and result["answers"][0][0] == "queen"


def test_3cosadd_is_the_evaluations_answer_and_3cosmul_differs_where_one_term_dominates():
    rng = np.random.default_rng(1)
    # mixed case (case folding: `Paris` is another spelling of `paris`) and random vectors
    base = [f"w{i}" for i in range(60)]
    words = ["<unk>", "<s>", "</s>", "<pad>", *base[:40], "W3", "W7", "W10", *base[40:]]
    vectors = rng.normal(size=(len(words), 8))
    solver = Analogies(words, vectors, restrict_vocab=50)
    rows, index, first = restricted_vocab(words, 50, case_key(True))
    unit = unit_rows(vectors[rows])
    questions = rng.choice(40, size=(200, 3))
    questions = questions[[len(set(q)) == 3 for q in questions]]
    for q in questions:
        abc = np.array([[index[f"W{i}"] for i in q]])
        expected = words[rows[_answers(unit, first, abc)[0]]]
        assert solver.answers(*(f"w{i}" for i in q))[0][0] == expected
    # a word beyond the searched words is not an answer and cannot be asked
    assert solver.position("w55") is None and solver.position("W7") == solver.position("w7")
    with pytest.raises(KeyError):
        solver.answers("w1", "w2", "w55")
    # Levy & Goldberg's case: a candidate very close to c alone wins 3CosAdd (the sum of its
    # cosines to b and c is larger), one close to b and c alike wins 3CosMul (their product)
    words = ["<unk>", "<s>", "</s>", "<pad>", "a", "b", "c", "near_c", "balanced"]
    v = np.array(
        [
            [0, 0, 0, 1.0],
            [0, 0, 1, 0.0],
            [0, 0, 1, 1.0],
            [0, 1, 0, 0.0],
            [1.0, 0, 0, 0],  # a
            [0, 1.0, 0, 0],  # b
            [0, 0, 1.0, 0],  # c
            [0, -0.1, 0.995, 0],  # cos to b, c: -0.1, 0.995
            [0, 0.4, 0.45, 0.798],  # 0.4, 0.45
        ]
    )
    solver = Analogies(words, v)
    add, mul = solver.answers("a", "b", "c")[0][0], solver.answers("a", "b", "c", method="3cosmul")
    assert add == _brute_force(words, v, "a", "b", "c", "3cosadd")[0][0]
    assert mul[0][0] == _brute_force(words, v, "a", "b", "c", "3cosmul")[0][0]
    assert (add, mul[0][0]) == ("near_c", "balanced")


def test_neighbours_on_planted_vectors_and_on_a_language_models_embeddings(project):
    words, vectors = _planted_vectors()
    code, out, err = cli(project, "neighbours", "--run", "planted", "king", "Paris", "-k", "3")
    assert code == 0, err
    rows = [line.split("\t") for line in out.splitlines()]
    assert [r[0] for r in rows] == ["king"] * 3 + ["paris"] * 3
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for probe, found in (("king", rows[:3]), ("paris", rows[3:])):
        i = words.index(probe)
        cos = unit @ unit[i]
        order = [j for j in np.argsort(-cos, kind="stable") if j != i and j >= 4][:3]
        assert [r[1] for r in found] == [words[j] for j in order]
        assert [float(r[2]) for r in found] == pytest.approx(cos[order], abs=1e-4)
    # a language model's input embeddings (models/RUN/vectors.txt)
    code, out, _ = cli(project, "neighbours", "--run", "lstm_lm", "cat", "-k", "4", "--json")
    found = json.loads(out)["neighbours"]["cat"]
    assert len(found) == 4 and all(-1 <= c <= 1 for _, c in found)


def test_evaluation_writes_each_vector_runs_analogy_answers(project):
    for run in ("svd", "lstm_lm", "nnlm", "transformer_lm"):
        answers = json.loads((project / "eval" / run / "analogies.json").read_text())
        assert [q["expected"] for q in answers] == ["bread", "zyzzyva", "ball"]
        first = answers[0]
        assert first["question"] == ["cat", "dog", "ball"]
        assert len(first["3cosadd"]) == 3 and len(first["3cosmul"]) == 3
        assert answers[1]["3cosadd"] is not None  # the expected word needs not be known
        assert answers[2]["3cosadd"] is None and answers[2]["3cosmul"] is None
        # the command gives the same answers
        _, out, _ = cli(project, "analogy", "--run", run, "cat", "dog", "ball", "-k", "3")
        assert [line.split("\t")[0] for line in out.splitlines()] == [
            w for w, _ in first["3cosadd"]
        ]
    assert not (project / "eval" / "ngram" / "analogies.json").exists()


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("command", ["generate", "score", "neighbours", "analogy", "translate"])
def test_help_has_an_example(command):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    assert f"example:\n  python -m nlpzoo {command} --run " in out.getvalue()
    assert "--mlflow-run ID" in out.getvalue()


ERRORS = [
    (("generate", "--run", "nnml"), "unknown run 'nnml'; did you mean 'nnlm'?"),
    (("score", "--run", "transformer_ml"), "did you mean 'transformer_lm'?"),
    (("neighbours", "--run", "xyz", "king"), "unknown run 'xyz' (runs: "),
    (("generate", "--run", "cbow"), "run 'cbow' is not trained yet: run `dvc repro train-cbow`"),
    (("analogy", "--run", "glove", "a", "b", "c"), "`dvc repro train-glove`"),
    (("generate", "--run", "svd"), "run 'svd' is a word-vector run (family svd); `generate` "),
    (("score", "--run", "fake_mt"), "translate with `python -m nlpzoo translate --run fake_mt`"),
    (("neighbours", "--run", "ngram", "cat"), "run 'ngram' (language-model run, family ngram)"),
    (("neighbours", "--run", "svd", "zyzzyva"), "word 'zyzzyva' is not in the vocabulary"),
    (("analogy", "--run", "planted", "man", "woman", "kings"), "close: king"),
    (("analogy", "--run", "svd", "cat", "<unk>", "dog"), "'<unk>' is a special token"),
    (
        ("analogy", "--run", "planted", "man", "woman", "w30", "--restrict-vocab", "20"),
        "word 'w30' is not among the 20 most frequent words",
    ),
    (("score", "--run", "ngram"), "no sentences to score"),
    (("generate", "--mlflow-run", "0123456789abcdef"), "MLflow run 0123456789abcdef not found"),
    (("translate", "--run", "svd"), "run 'svd' is a word-vector run (family svd); `translate` "),
    (("translate", "--run", "transformr"), "did you mean 'transformer'?"),
    (("translate", "--run", "fake_mt"), "run 'fake_mt': its model in "),
    (("generate", "--mlflow-run", ""), "'' is not an MLflow run id"),  # an unset variable
    (("generate", "--run", "../models/ngram"), "--run takes a run's name (models/RUN/), not a"),
]


@pytest.mark.parametrize(("args", "message"), ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_each_error_is_one_line_and_status_1(project, args, message):
    code, out, err = cli(project, *args)
    assert code == 1 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err
    if "language-model run" in message and "neighbours" in args:  # the runs it would take
        listed = set(err.split("takes a run with vectors: ")[1].strip().split(", "))
        assert listed == {r for r, e in PARAMS["models"].items() if e["family"] != "ngram"} - {
            r for r, e in PARAMS["models"].items() if FAMILIES[e["family"]].task == "mt"
        }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("generate", "--run", "ngram", "--seed", "-1"), "must be >= 0"),
        (("generate", "--run", "ngram", "--temperature", "1e-320"), "must be 0 (always the most"),
        (("generate", "--run", "ngram", "--tokens", "0"), "must be >= 1"),
        (("generate", "--run", "ngram", "--tokens", "1.5"), "must be a whole number, got '1.5'"),
        (("generate", "--run", "ngram", "--tokens", "100001"), "must be <= 100,000"),
        (("generate", "--run", "ngram", "--samples", "10001"), "must be <= 10,000"),
        (("generate", "--run", "ngram", "--top-k", "many"), "must be a whole number"),
        (("generate", "--run", "ngram", "--temperature", "warm"), "must be a number, got 'warm'"),
    ],
)
def test_options_out_of_range_are_refused_by_the_parser(project, args, message):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
        main([*args, "--root", str(project)])
    assert e.value.code == 2
    assert f"argument {args[3]}: {message}" in err.getvalue()


def test_damaged_runs_and_inputs_give_one_line_errors(project, tmp_path):
    models = project / "models"
    broken = {
        "as_list": ("[]", None, "is not a run's config (a JSON object)"),
        "no_data": ('{"family": "nnlm"}', b"", "its vocabulary is not found"),
        "size_text": (
            (models / "nnlm" / "config.json")
            .read_text()
            .replace('"vocab_size": ', '"vocab_size": "x", "_": '),
            b"",
            "has vocab_size 'x', not a number of words",
        ),
        "truncated": (  # lstm_lm's run, its model.pt cut short
            (models / "lstm_lm" / "config.json").read_text(),
            (models / "lstm_lm" / "model.pt").read_bytes()[:1000],
            "run 'truncated': its model in",
        ),
    }
    try:
        for name, (config, model, _) in broken.items():
            (models / name).mkdir()
            (models / name / "config.json").write_text(config)
            (models / name / "model.pt").write_bytes(model if model is not None else b"")
        for name, (_, _, message) in broken.items():
            code, out, err = cli(project, "generate", "--run", name, stdin="")
            assert code == 1 and out == "" and err.count("\n") == 1, err
            assert err.startswith("error: ") and message in err, err
    finally:
        for name in broken:
            shutil.rmtree(models / name, ignore_errors=True)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("der hund läuft\n".encode("latin-1"))
    for path, message in ((latin1, "is not UTF-8 text (byte 10: 0xe4)"), (tmp_path, "cannot read")):
        code, out, err = cli(project, "score", "--run", "ngram", str(path))
        assert code == 1 and out == "" and message in err, err
    (project / "notutf8").mkdir()
    (project / "notutf8" / "params.yaml").write_bytes(b"models:\n  \xff: {}\n")
    code, _, err = cli(project / "notutf8", "neighbours", "--run", "svd", "cat")
    assert code == 1 and "unknown run 'svd'" in err  # the unreadable params: no runs, no crash


def test_input_lines_are_the_files_lines(project, tmp_path):
    """A byte-order mark is no part of the first word; line numbers count "\\n" only (not the
    form feed inside line 1), and a "\\r\\n" file reads as its "\\n" twin."""
    plain = cli(project, "score", "--run", "ngram", stdin="the cat sees it .\nshe eats it .\n")
    assert plain[0] == 0 and [r.split("\t")[0] for r in plain[1].splitlines()] == [
        "1",
        "2",
        "total",
    ]
    path = tmp_path / "windows.txt"
    path.write_bytes(b"\xef\xbb\xbfthe cat\x0csees it .\r\nshe eats it .\r\n")
    code, out, err = cli(project, "score", "--run", "ngram", str(path))
    assert code == 0 and "<unk>" not in out and err == "", err
    assert [r.split("\t")[:2] for r in out.splitlines()] == [
        r.split("\t")[:2] for r in plain[1].splitlines()
    ]
    code, out, _ = cli(project, "score", "--run", "ngram", stdin="\ufeffthe cat sees it .\n")
    assert code == 0 and out.splitlines()[0] == plain[1].splitlines()[0]
    path.write_bytes(b"\xef\xbb\xbfthe cat\n\xff\n")  # the bad byte counted from the file's start
    code, _, err = cli(project, "score", "--run", "ngram", str(path))
    assert code == 1 and f"{path} is not UTF-8 text (byte 11: 0xff)" in err, err


def test_closed_streams_an_interrupt_and_a_full_disk_end_in_one_line(project, monkeypatch):
    monkeypatch.setattr(sys, "stdin", None)
    code, _, err = _main(project, "score", "--run", "ngram")
    assert code == 1 and err == "error: standard input is closed: name a file to read\n"
    monkeypatch.setattr(sys, "stdout", None)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["generate", "--run", "ngram", "--root", str(project)])
    assert code == 1 and "standard output is closed" in err.getvalue()
    monkeypatch.undo()

    class Full(io.StringIO):
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    err = io.StringIO()
    with contextlib.redirect_stdout(Full()), contextlib.redirect_stderr(err):
        code = main(["generate", "--run", "ngram", "--root", str(project)])
    assert code == 1 and err.getvalue() == "error: No space left on device\n"

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(use.commands, "generate", interrupted)
    code, out, err = _main(project, "generate", "--run", "ngram")
    assert code == 130 and out == "" and "Traceback" not in err


def _main(project: Path, *args: str) -> tuple[int, str, str]:
    """`cli` without replacing stdin."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*args, "--root", str(project)])
    return code, out.getvalue(), err.getvalue()


def test_models_that_is_no_mapping_leaves_the_trained_runs_usable(project, tmp_path):
    root = tmp_path / "listed"
    root.mkdir()
    for name in ("models", "data"):
        (root / name).symlink_to(project / name)
    for text in ("models: [ngram]\n", "models: ngram\n", "models: 5\n"):
        (root / "params.yaml").write_text(text)
        code, out, err = cli(root, "generate", "--run", "ngram", "--tokens", "2")
        assert code == 0 and out.count("\n") == 1, err


@contextlib.contextmanager
def _copied_run(project: Path, source: str, name: str):
    """models/NAME, a copy of models/SOURCE for a test to damage; removed afterwards."""
    folder = project / "models" / name
    shutil.copytree(project / "models" / source, folder)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def test_a_run_file_of_another_tool_that_is_not_utf8_is_named(project):
    with _copied_run(project, "svd", "latin") as folder:
        vectors = folder / "vectors.txt"
        data = vectors.read_bytes()
        vectors.write_bytes(data + "café 0.1\n".encode("latin-1"))
        code, out, err = cli(project, "neighbours", "--run", "latin", "cat")
        assert code == 1 and out == "" and err.count("\n") == 1, err
        assert f"run 'latin': {vectors} is not UTF-8 text (byte {len(data) + 3}: 0xe9)" in err


def test_a_run_with_nan_weights_or_vectors_answers_nothing(project):
    """NaN would print as invalid JSON, empty analogies or one word repeated, with status 0."""
    with _copied_run(project, "nnlm", "diverged") as folder:
        blob = torch.load(folder / "model.pt", weights_only=True)
        first = next(iter(blob["state_dict"]))
        blob["state_dict"][first][0] = float("nan")
        torch.save(blob, folder / "model.pt")
        for args in (("generate", "--run", "diverged"), ("neighbours", "--run", "diverged", "cat")):
            (folder / "vectors.txt").unlink(missing_ok=True)  # neighbours: the model's own
            code, out, err = cli(project, *args)
            assert code == 1 and out == "" and err.count("\n") == 1, err
            assert "run 'diverged': its weights hold NaN or infinite values" in err, err
        words, vectors = _planted_vectors()
        vectors[5, 3] = np.inf
        write_word2vec_text(folder / "vectors.txt", words, vectors)
        code, out, err = cli(project, "neighbours", "--run", "diverged", "cat", "--json")
        assert code == 1 and out == "" and "its vectors hold NaN or infinite values" in err, err


def test_a_model_file_of_random_bytes_gives_no_advice_to_unpickle_it(project):
    with _copied_run(project, "nnlm", "noise") as folder:
        (folder / "model.pt").write_bytes(np.random.default_rng(0).bytes(4000))
        code, out, err = cli(project, "generate", "--run", "noise")
        assert code == 1 and out == "" and err.count("\n") == 1, err
        assert "run 'noise': its model in" in err and "weights_only" not in err, err


# --------------------------------------------------------------------------- MLflow


@pytest.mark.parametrize("run", ["ngram", "lstm_lm"])
def test_a_run_from_mlflow_works_as_its_folder(project, run):
    """The register stage logs the run's files as its MLflow model; `--mlflow-run ID` reads
    them from there."""
    registry.register(_params(), run, project)
    run_id = json.loads((project / "models" / run / "mlflow_run.json").read_text())["run_id"]
    commands = [
        ("generate", "--prompt", "she", "--tokens", "8", "--seed", "2", "--samples", "2"),
        ("score", str(project / "data" / "prepared" / "lm" / "valid.txt")),
    ]
    if FAMILIES[PARAMS["models"][run]["family"]].vectors:  # no vectors.txt: the embeddings
        commands += [("neighbours", "cat", "dog", "-k", "3"), ("analogy", "cat", "dog", "ball")]
    for args in commands:
        local = cli(project, *args[:1], "--run", run, *args[1:])
        logged = cli(project, *args[:1], "--mlflow-run", run_id, *args[1:])
        assert local[0] == logged[0] == 0, logged[2]
        assert logged[1] == local[1]
