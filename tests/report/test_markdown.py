import json

from nlpzoo.report.markdown import build_report


def _write(path, obj):
    path.write_text(json.dumps(obj))


def test_report_renders_whatever_runs_exist(tmp_path):
    metrics, plots, out = tmp_path / "metrics", tmp_path / "plots", tmp_path / "reports"
    metrics.mkdir()
    plots.mkdir()
    assert "No language-model runs yet" in build_report(metrics, plots, out)

    _write(
        metrics / "ngram.json",
        {"family": "ngram", "valid_ppl": 160.0, "test_ppl": 150.0, "params": 10},
    )
    _write(
        metrics / "nnlm.json",
        {
            "family": "nnlm",
            "valid_ppl": 130.0,
            "test_ppl": 120.0,
            "params": 2000,
            "analogy_acc": 0.05,
            "analogy_sem_acc": 0.02,
            "analogy_syn_acc": 0.07,
            "analogy_coverage": 0.5,
            "ws353_rho": 0.2,
            "simlex_rho": 0.1,
        },
    )
    _write(
        metrics / "mixtures.json",
        {"baseline": "ngram", "runs": {"nnlm": {"lambda": 0.6, "test_ppl_mix": 112.5}}},
    )
    (plots / "nnlm.csv").write_text(
        "epoch,step,train_loss,val_loss,val_ppl,seconds\n0,10,5,4.9,134,1\n1,20,4.8,4.87,130,2\n"
    )
    text = build_report(metrics, plots, out)
    assert (out / "report.md").read_text() == text
    lm_part = text.split("## Word vectors")[0]
    rows = {
        line.split("|")[1].strip(): line for line in lm_part.splitlines() if line.startswith("|")
    }
    assert "0.800" in rows["nnlm"]  # 120 / 150
    assert "112.5 (0.60)" in rows["nnlm"] and "0.750" in rows["nnlm"]  # mixture and its ratio
    assert "1.000" in rows["ngram"]
    assert "2.0 / 7.0 / 5.0" in text and "0.200" in text  # the word-vector table
    assert (out / "curves.png").stat().st_size > 0
    assert "mixtures" not in rows  # the mixtures file is not a run
