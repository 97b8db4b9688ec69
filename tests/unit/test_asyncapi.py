"""schemas/asyncapi.yaml, the AsyncAPI 3.0 document of the worker's Kafka topics.

Without npm: the document is YAML of AsyncAPI 3.0.0, references every schemas/*.json (a new schema must
be added to it), its $refs all resolve, and its channels are the default topics of worker.config.Config
with the partition counts of deploy/kafka/create-topics.sh.

With the AsyncAPI CLI (`@asyncapi/cli`, the AsyncAPI project's own parser and Spectral ruleset):
`asyncapi validate` accepts the document, and rejects deliberately broken copies of it (so that the
check can fail). .ci/run installs the CLI into .tools/asyncapi; without it these tests skip, saying how.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from worker.config import Config

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
DOC = SCHEMAS / "asyncapi.yaml"
CREATE_TOPICS = ROOT / "deploy" / "kafka" / "create-topics.sh"

CLI_VERSION = "4.1.1"  # the same pin as .ci/run: the last @asyncapi/cli for Node < 24 (5.x needs Node 24)
# Where .ci/run installs it: once per machine (it is 1.5 GB), outside the checkout, so that every CI
# clone finds it; a checkout's own .tools/asyncapi works too.
MACHINE_CLI = (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rating-worker"
               / f"asyncapi-cli-{CLI_VERSION}" / "node_modules" / ".bin" / "asyncapi")
LOCAL_CLI = ROOT / ".tools" / "asyncapi" / "node_modules" / ".bin" / "asyncapi"
INSTALL_HINT = (f"npm install --prefix ~/.cache/rating-worker/asyncapi-cli-{CLI_VERSION} --no-audit --no-fund "
                f"--ignore-scripts @asyncapi/cli@{CLI_VERSION} (.ci/run installs it when npm is available)")

# Spectral's severities, as the CLI writes them in --diagnostics-format json.
ERROR, WARNING, INFO, HINT = 0, 1, 2, 3


def load(path: Path | None = None) -> dict:
    return yaml.safe_load((path or DOC).read_text(encoding="utf-8"))


def refs(node, path=()):
    """Every ($ref value, where) in the document, walking all of it."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value, "/".join(map(str, path))
            else:
                yield from refs(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from refs(value, (*path, i))


def is_local_file(ref: str) -> bool:
    return not ref.startswith("#") and not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", ref)


def pointer(doc, fragment: str):
    """The node a JSON Pointer fragment ('/components/schemas/x') names, or KeyError."""
    node = doc
    for part in fragment.split("/")[1:] if fragment else ():
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


# --- without npm ------------------------------------------------------------------------------------

def test_is_asyncapi_3_0():
    doc = load()
    assert doc["asyncapi"] == "3.0.0"
    assert doc["info"]["title"] == "rating-worker"
    assert {"channels", "operations", "components"} <= doc.keys()


def test_every_json_schema_is_referenced():
    referenced = {(DOC.parent / ref.split("#", 1)[0]).resolve()
                  for ref, _ in refs(load()) if is_local_file(ref)}
    # the message schemas: openapi.json is the read API's document (tests/unit/test_openapi.py)
    schemas = {p.resolve() for p in SCHEMAS.glob("*.json") if p.stem != "openapi"}
    assert schemas, "no schemas/*.json found"
    missing = sorted(p.name for p in schemas - referenced)
    assert not missing, f"schemas/asyncapi.yaml does not reference {missing}: add them to the document"


def test_every_ref_resolves():
    doc = load()
    for ref, where in refs(doc):
        target, _, fragment = ref.partition("#")
        if is_local_file(ref):
            file = DOC.parent / target
            assert file.is_file(), f"{where}: $ref {ref!r} names a file that does not exist"
            if fragment:
                pointer(json.loads(file.read_text(encoding="utf-8")), fragment)
        elif not target:
            try:
                pointer(doc, fragment)
            except (KeyError, IndexError, ValueError):
                pytest.fail(f"{where}: $ref {ref!r} points at nothing in the document")


def test_channels_are_the_default_topics():
    doc, config = load(), Config()
    channels = doc["channels"]
    by_action: dict[str, set[str]] = {"receive": set(), "send": set()}
    for name, op in doc["operations"].items():
        channel_ref = op["channel"]["$ref"]
        assert channel_ref.startswith("#/channels/"), name
        by_action[op["action"]].add(channels[channel_ref.removeprefix("#/channels/")]["address"])
    assert by_action["receive"] == set(config.kafka_input_topics)
    assert by_action["send"] == {config.kafka_output_topic, config.kafka_dlq_topic}
    addresses = [c["address"] for c in channels.values()]
    topics = [*config.kafka_input_topics, config.kafka_output_topic, config.kafka_dlq_topic]
    assert sorted(addresses) == sorted(topics)
    for name, channel in channels.items():
        assert channel["bindings"]["kafka"]["topic"] == channel["address"], name


def test_consumer_group_is_the_default():
    doc = load()
    group = doc["components"]["operationBindings"]["consumerGroup"]["kafka"]["groupId"]
    assert group["enum"] == [Config().kafka_group_id]
    for name, op in doc["operations"].items():
        if op["action"] == "receive":
            assert op["bindings"] == {"$ref": "#/components/operationBindings/consumerGroup"}, name


def test_partitions_are_those_of_create_topics():
    created = {topic: int(n) for topic, n in
               re.findall(r'^create\s+(\S+)\s+"\$\{\w+:-(\d+)\}"', CREATE_TOPICS.read_text(), re.M)}
    assert len(created) == 7, created
    bindings = {c["address"]: c["bindings"]["kafka"] for c in load()["channels"].values()}
    assert {topic: b["partitions"] for topic, b in bindings.items()} == created
    assert bindings[Config().kafka_dlq_topic]["topicConfiguration"]["retention.ms"] == 2592000000


# --- with the AsyncAPI CLI --------------------------------------------------------------------------

def cli() -> str:
    found = shutil.which("asyncapi") or next((str(p) for p in (MACHINE_CLI, LOCAL_CLI) if p.exists()), None)
    if found is None:
        pytest.skip(f"the AsyncAPI CLI is not installed: {INSTALL_HINT}")
    return found


def validate(document: Path, tmp_path: Path) -> tuple[int, list[dict], str]:
    """Run `asyncapi validate`: (exit code, its diagnostics, what it printed)."""
    # No telemetry, no update check, nothing written to $HOME. The 4.x CLI does not read an
    # ASYNCAPI_METRICS variable: it sends command metrics (to New Relic) unless CI=true or its analytics
    # file (ASYNCAPI_METRICS_CONFIG_PATH, else ~/.asyncapi-analytics, created on first use) says
    # analyticsEnabled "false"; both are set here. ASYNCAPI_SKIP_NEW_VERSION_CHECK turns off oclif's
    # update check against the npm registry; the XDG_* directories keep oclif's cache out of $HOME.
    # Checked with strace: no connect() at all with this environment.
    analytics = tmp_path / "asyncapi-analytics.json"
    analytics.write_text(json.dumps({"analyticsEnabled": "false", "infoMessageShown": "true",
                                     "userID": "test"}))
    env = {
        **os.environ,
        "CI": "true",
        "ASYNCAPI_METRICS_CONFIG_PATH": str(analytics),
        "ASYNCAPI_SKIP_NEW_VERSION_CHECK": "true",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
    }
    saved = tmp_path / "diagnostics.json"
    # --fail-severity warn: a warning fails the run as well as an error (see test_the_document_is_valid).
    r = subprocess.run(
        [cli(), "validate", str(document), "--diagnostics-format", "json", "--fail-severity", "warn",
         "--save-output", str(saved)],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=300,  # about 4 s on an idle machine; node and Spectral start slowly on a busy one
    )
    output = r.stdout + r.stderr
    diagnostics = json.loads(saved.read_text()) if saved.exists() else []
    return r.returncode, diagnostics, output


def test_the_document_is_valid(tmp_path):
    code, diagnostics, output = validate(DOC, tmp_path)
    # What is accepted: infos and hints, the CLI's "governance" suggestions, which are not faults of the
    # document. With CLI 4.1.1 the only one printed is asyncapi-latest-version ("It is recommended update
    # to the 3.1.0 version"): the document is 3.0.0 on purpose (test_is_asyncapi_3_0). Errors fail, and so
    # do warnings: there are none today, and a new one is worth a look rather than a silent pass.
    # Note: the parser has no schema parser for JSON Schema draft 2020-12; it resolves the $refs of those
    # payloads (a missing file is an error, see below) but leaves their content alone, without a warning.
    # The schemas themselves are checked where the worker compiles them (worker.contract.schemas).
    faults = [d for d in diagnostics if d["severity"] in (ERROR, WARNING)]
    assert code == 0, f"asyncapi validate exited {code}:\n{output}"
    assert not faults, json.dumps(faults, indent=1)
    # Nor anything printed about an error outside the diagnostics.
    assert not re.search(r"\berror", output, re.I), output


BREAKS = {
    # AsyncAPI 2's verb where 3.0 says send/receive: the parser's JSON Schema of the spec rejects it.
    "an operation action that 3.0 does not have": (
        lambda doc: doc["operations"]["sendRatingChanged"].__setitem__("action", "publish"),
        lambda d: d["path"][:3] == ["operations", "sendRatingChanged", "action"]),
    # A payload schema file that does not exist: the parser resolves every relative $ref.
    "a $ref to a missing schema file": (
        lambda doc: doc["components"]["messages"]["gameFinishedBinary"]["payload"]["schema"].__setitem__(
            "$ref", "./no-such-schema.json"),
        lambda d: d["code"] == "invalid-ref" and "gameFinishedBinary" in d["path"]),
    # A Kafka binding with the wrong type: the bindings (0.5.0) are checked against their schema too.
    "a partition count that is not an integer": (
        lambda doc: doc["channels"]["ratingsDlq"]["bindings"]["kafka"].__setitem__("partitions", "three"),
        lambda d: d["path"][:2] == ["channels", "ratingsDlq"]),
}


@pytest.mark.parametrize("broken", BREAKS, ids=lambda s: s.replace(" ", "-"))
def test_the_parser_rejects_a_broken_document(tmp_path, broken):
    """A copy of the document (with the JSON Schemas beside it), with one fault: validation must fail,
    and every error must be about that fault (so the copy itself is sound and the check is real)."""
    cli()  # skip early without the CLI
    break_it, about_it = BREAKS[broken]
    copy = tmp_path / "schemas"
    copy.mkdir()
    for schema in SCHEMAS.glob("*.json"):
        shutil.copy(schema, copy / schema.name)
    doc = load()
    break_it(doc)
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    (copy / "asyncapi.yaml").write_text(text, encoding="utf-8")
    code, diagnostics, output = validate(copy / "asyncapi.yaml", tmp_path)
    errors = [d for d in diagnostics if d["severity"] == ERROR]
    assert code != 0, f"asyncapi validate accepted a broken document:\n{output}"
    assert errors, output
    assert all(about_it(d) for d in errors), json.dumps(errors, indent=1)
