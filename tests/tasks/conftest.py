import pytest


@pytest.fixture
def project_tracking(project, monkeypatch):
    """MLflow logs to the store of the module's toy `project` (its mlflow.db). A module takes it
    with `pytestmark = pytest.mark.usefixtures("project_tracking")`."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'mlflow.db'}")
