"""The CloudEvents Kafka protocol binding (cloudevents/spec, bindings/kafka-protocol-binding.md, 1.0.2): how
a Kafka record carries an event, in one of its two content modes.

- **Structured** (section 3.3): the whole event, attributes and `data`, is one JSON object in the record
  value; the `content-type` header, when there is one, is the event format's media type
  (`application/cloudevents+json`). Every record the worker writes is structured.
- **Binary** (section 3.2): the value is the event's `data` alone; each attribute is a header named
  `ce_<attribute>` whose value is the attribute as a UTF-8 string, and `datacontenttype` is the
  `content-type` header. Several CloudEvents SDKs produce this mode by default.

Which mode a record uses (section 1.3 leaves it to `content-type`): a `content-type` that starts with
`application/cloudevents` is structured; otherwise a `ce_specversion` header makes the record binary;
a record with neither is structured, as every producer of the worker's first versions sent it (no
headers at all). A binary record is turned into the same dict a structured record parses to, so that the
envelope's and the type's schemas and rules apply to both alike (`worker.contract.decode`).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["OUTPUT_HEADERS", "STRUCTURED_CONTENT_TYPE", "binary_attributes"]

STRUCTURED_CONTENT_TYPE = "application/cloudevents+json"
# The headers of every rating.changed record: a receiver that follows the binding reads it as structured.
# (A list: aiokafka's record builder takes nothing else; it is never changed.)
OUTPUT_HEADERS: list[tuple[str, bytes]] = [("content-type", STRUCTURED_CONTENT_TYPE.encode())]

_PREFIX = "ce_"
_BATCH = "application/cloudevents-batch"


def binary_attributes(headers: Iterable[tuple[str, bytes | None]]) -> dict[str, str] | None:
    """The event attributes of a binary-mode record (`datacontenttype` from `content-type`), or None for a
    structured one. Raises ValueError, with a sentence naming the header, for headers that cannot make an
    event: a header value that is not UTF-8 or missing, an attribute sent twice, or batched mode."""
    content_type: str | None = None
    attributes: dict[str, str] = {}
    for name, raw in headers:
        lowered = name.lower()
        if lowered == "content-type":
            content_type = _text(name, raw)
        elif lowered.startswith(_PREFIX):
            attribute = lowered[len(_PREFIX):]
            if attribute in attributes:
                raise ValueError(f"header {name}: sent more than once")
            attributes[attribute] = _text(name, raw)
    if content_type is not None and content_type.strip().lower().startswith("application/cloudevents"):
        if content_type.strip().lower().startswith(_BATCH):
            raise ValueError(f"header content-type: batched mode ({content_type}) is not supported, send one "
                             "event per record")
        return None
    if "specversion" not in attributes:
        return None
    if content_type is not None:
        attributes["datacontenttype"] = content_type
    return attributes


def _text(name: str, raw: bytes | None) -> str:
    if raw is None:
        raise ValueError(f"header {name}: has no value")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"header {name}: invalid UTF-8 at byte {exc.start}") from None
