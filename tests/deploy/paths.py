"""Where deploy/ is, and the tools the deploy tests use when the machine has them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROMETHEUS_DIR = DEPLOY / "prometheus"
K8S = DEPLOY / "k8s"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "rating-worker.json"
READ_ONLY_ROLE_SQL = DEPLOY / "postgres" / "read-only-role.sql"

INSTALL_HINT = ("Debian's prometheus package provides it: apt-get install prometheus "
                "(.ci/run installs it when apt-get is available)")


def need(tool: str) -> str:
    """The tool's path, or skip the test, saying what to install."""
    path = shutil.which(tool)
    if path is None:
        hint = INSTALL_HINT if tool in ("promtool", "prometheus") else "not on PATH"
        pytest.skip(f"{tool} is not installed: {hint}")
    return path


def load_yaml_all(path: Path) -> list:
    yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read deploy/ YAML (pip install pyyaml)")
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def load_yaml(path: Path):
    docs = load_yaml_all(path)
    assert len(docs) == 1, f"{path} should hold one YAML document"
    return docs[0]


def read_only_role() -> str:
    """The role deploy/postgres/read-only-role.sql creates when not told another (its `\\set reader`)."""
    return re.search(r"^\s*\\set reader (\S+)$", READ_ONLY_ROLE_SQL.read_text(), re.M).group(1)
