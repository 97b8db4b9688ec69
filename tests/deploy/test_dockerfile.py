"""deploy/Dockerfile, read as text: no Docker engine here, so the image is never built by the tests.

Its health check command is run for real against a worker and against the read API in
test_prometheus_scrape.py.
"""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib

from tests.deploy.paths import DEPLOY, ROOT
from worker.config import Config, ServeConfig

DOCKERFILE = (DEPLOY / "Dockerfile").read_text()


def instructions(name: str) -> list[str]:
    """The arguments of every `name` instruction, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    return [m.group(1).strip() for m in re.finditer(rf"^{name}\s+(.*)$", text, re.M)]


def healthcheck_command() -> list[str]:
    (hc,) = instructions("HEALTHCHECK")
    return json.loads(hc[hc.index("CMD") + 3:].strip())


def test_base_image_is_pinned_to_a_patch_release_that_the_project_supports():
    (arg,) = [a for a in instructions("ARG") if a.startswith("PYTHON_IMAGE=")]
    image = arg.split("=", 1)[1]
    m = re.fullmatch(r"python:(\d+)\.(\d+)\.(\d+)-slim-[a-z]+", image)
    assert m, f"pin the base to python:X.Y.Z-slim-<debian release>, got {image!r}"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = tuple(int(x) for x in requires.removeprefix(">=").split("."))
    assert (int(m.group(1)), int(m.group(2))) >= minimum
    assert instructions("FROM") == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"], "every stage on the pinned base"


def test_runs_as_a_non_root_user():
    (user,) = instructions("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0, "numeric, so Kubernetes' runAsNonRoot can check it"
    assert f"--uid {uid}" in DOCKERFILE


def test_entrypoint_is_the_worker_command_and_the_ports_are_the_worker_s_and_the_api_s():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert json.loads(instructions("ENTRYPOINT")[0]) == [next(iter(scripts))]
    assert json.loads(instructions("CMD")[-1]) == ["run"]
    (exposed,) = instructions("EXPOSE")
    assert exposed.split() == [str(Config().metrics_port), str(ServeConfig().api_port)]
    assert f"METRICS_PORT={Config().metrics_port}" in DOCKERFILE
    assert f"API_PORT={ServeConfig().api_port}" in DOCKERFILE
    assert instructions("STOPSIGNAL") == ["SIGTERM"]


def test_healthcheck_asks_healthz_on_the_metrics_port_or_the_api_port():
    """One image, two servers: the worker (`run`) on METRICS_PORT, the read API (`serve`) on API_PORT."""
    cmd = healthcheck_command()
    assert cmd[0] == "python" and "/healthz" in cmd[-1]
    assert "METRICS_PORT" in cmd[-1] and "API_PORT" in cmd[-1]


def ignored(path: str) -> bool:
    """Whether Dockerfile.dockerignore (BuildKit's per-Dockerfile ignore file) leaves `path` out."""
    patterns = [line.strip() for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    result = False
    for p in patterns:
        negate = p.startswith("!")
        p = p.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, p + "/*") or (
                p.startswith("**/") and fnmatch.fnmatch(path.rsplit("/", 1)[-1], p[3:])):
            result = not negate
    return result


def copied_sources() -> list[str]:
    return [s for a in instructions("COPY") if not a.startswith("--from") for s in a.split()[:-1]]


def test_build_context_holds_what_the_image_copies():
    sources = copied_sources()
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not ignored(source), f"{source} is copied but excluded from the build context"
    for path in ("worker/pipeline/loop.py", "worker/schemas/envelope.json", "worker/store/migrations/0001_initial.sql"):
        assert not ignored(path), path
    for path in (".venv/bin/python", ".git/HEAD", "tests/deploy/test_dockerfile.py", "worker/__pycache__/x.pyc"):
        assert ignored(path), path


def test_symbolic_links_in_the_package_point_at_copied_files():
    """COPY keeps a symbolic link as a link: what it points at must be copied too (worker/schemas ->
    ../schemas), or the installed package has no JSON Schemas and the worker cannot start."""
    sources = copied_sources()
    links = [p for p in (ROOT / "worker").rglob("*") if p.is_symlink()]
    for link in links:
        target = link.resolve().relative_to(ROOT).as_posix()
        assert any(target == s or target.startswith(s.rstrip("/") + "/") for s in sources), \
            f"{link.relative_to(ROOT)} -> {target}, which the Dockerfile does not copy"
        assert not ignored(target), f"{target} is excluded from the build context"
