from nlpzoo.cli import root
from nlpzoo.tracking import tracking_uri


def test_a_queued_experiment_writes_in_its_copy_and_logs_to_the_parent(tmp_path, monkeypatch):
    """DVC runs a queued experiment in a temporary copy with DVC_ROOT set to the parent repo:
    outputs belong to the copy (the working directory), the MLflow database to the parent."""
    copy, parent = tmp_path / "copy", tmp_path / "parent"
    copy.mkdir()
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("DVC_ROOT", str(parent))
    monkeypatch.chdir(copy)
    assert root() == copy.resolve()
    assert tracking_uri() == f"sqlite:///{parent.resolve()}/mlflow.db"
