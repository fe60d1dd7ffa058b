"""Options of the ``logbroker`` data source, named as Spark's Kafka source names them (pure).

Spark hands options over case-insensitively (lower-cased keys). Every option is checked here, on
the driver, before any task runs: an unknown name, a missing ``topic``, both or neither of
``path``/``url``, or a malformed value raises ``OptionError`` whose message names the option, what
was given and what is accepted. Nothing is read or written before the options are valid.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Final, Literal

from coordinator.models import NAME_PATTERN as GROUP_NAME
from spark_connector.errors import OptionError

EARLIEST: Final = -2
LATEST: Final = -1
TOPIC_NAME_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
TOPIC_NAME_CHARS_MAX: Final = 200
ACKS: Final = ("0", "1", "all")
WRITE_BATCH_BYTES_DEFAULT: Final = 1 << 20
WRITE_BATCH_BYTES_MAX: Final = 64 << 20
HTTP_TIMEOUT_S_DEFAULT: Final = 60.0
# Options Spark itself may add to a source's or sink's options; accepted and ignored.
SPARK_SET: Final = frozenset({"checkpointlocation", "__checkpointlocation", "queryname"})

# How the options are spelled in messages (Spark lower-cases the names it hands over).
DISPLAY: Final = {
    "startingoffsets": "startingOffsets", "endingoffsets": "endingOffsets", "startingtimestamp": "startingTimestamp",
    "maxoffsetspertrigger": "maxOffsetsPerTrigger", "failondataloss": "failOnDataLoss",
    "minpartitions": "minPartitions", "timeoutseconds": "timeoutSeconds", "batchbytes": "batchBytes",
    "cafile": "caFile", "exactlyonce": "exactlyOnce", "committogroup": "commitToGroup",
    "encryptionkeysfile": "encryptionKeysFile",
}
READ_OPTIONS: Final = frozenset({
    "topic", "path", "url", "token", "username", "password", "startingoffsets", "endingoffsets", "startingtimestamp",
    "maxoffsetspertrigger", "failondataloss", "minpartitions", "timeoutseconds", "cafile", "committogroup",
    "encryptionkeysfile",
})
WRITE_OPTIONS: Final = frozenset({
    "topic", "url", "token", "username", "password", "acks", "batchbytes", "timeoutseconds", "path", "cafile",
    "exactlyonce",
})

# Per-partition start/end: a concrete offset, or EARLIEST/LATEST (Kafka's -2/-1 in JSON).
OffsetSpec = Literal["earliest", "latest"] | dict[int, int]
Mode = Literal["batch", "stream"]


@dataclasses.dataclass(frozen=True, slots=True)
class Location:
    """Where records live: data directories read directly, or a node's HTTP URL (for HTTPS with a
    private CA, ``ca_file`` names its certificate, a path readable wherever tasks run)."""

    data_dirs: tuple[str, ...] = ()
    url: str = ""
    token: str | None = None
    timeout_s: float = HTTP_TIMEOUT_S_DEFAULT
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    # The node's key ring file (mode 0600), for a direct read of batches encrypted at rest.
    keys_file: str | None = None

    @property
    def direct(self) -> bool:
        return bool(self.data_dirs)


@dataclasses.dataclass(frozen=True, slots=True)
class ReadOptions:
    topic: str
    location: Location
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: int | None
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    min_partitions: int | None
    commit_to_group: str | None = None  # a streaming query's progress, committed to this group


@dataclasses.dataclass(frozen=True, slots=True)
class WriteOptions:
    topic: str
    location: Location
    acks: str
    batch_bytes: int
    exactly_once: bool = True  # each batch carries an identity a re-run repeats (``write_identity``)


def parse_read_options(options: Mapping[str, str], mode: Mode) -> ReadOptions:
    """Validate the options of ``spark.read`` (``mode="batch"``) or ``spark.readStream``."""
    opts = _lowered(options)
    _check_known(opts, READ_OPTIONS, "reading")
    topic = _topic(opts)
    location = _location(opts, allow_path=True)
    starting_timestamp = _optional_int(opts, "startingtimestamp", low=0)
    if starting_timestamp is not None and "startingoffsets" in opts:
        raise OptionError("give either startingOffsets or startingTimestamp, not both")
    starting = _offsets_option(opts, "startingoffsets", topic, "latest" if mode == "stream" else "earliest",
                               allow_latest=True, allow_earliest=True)
    if mode == "stream" and "endingoffsets" in opts:
        raise OptionError("endingOffsets is for batch reads only; a streaming query reads on as data arrives")
    ending = _offsets_option(opts, "endingoffsets", topic, "latest", allow_latest=True, allow_earliest=False)
    max_per_trigger = _optional_int(opts, "maxoffsetspertrigger", low=1)
    if mode == "batch" and max_per_trigger is not None:
        raise OptionError("maxOffsetsPerTrigger is for streaming reads only")
    min_partitions = _optional_int(opts, "minpartitions", low=1)
    if mode == "stream" and min_partitions is not None:
        raise OptionError("minPartitions is for batch reads only")
    group = opts.get("committogroup") or None
    if group is not None:
        if mode == "batch":
            raise OptionError("commitToGroup is for streaming reads only (it commits each finished micro-batch)")
        if location.direct:
            raise OptionError("commitToGroup commits through a node: give url (and path is not needed)")
        if not GROUP_NAME.fullmatch(group) or group in (".", ".."):
            raise OptionError(f"commitToGroup must be a group name ({GROUP_NAME.pattern}), not {group[:80]!r}")
    return ReadOptions(topic, location, starting, ending, starting_timestamp, max_per_trigger,
                       _bool(opts, "failondataloss", default=True), min_partitions, group)


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate the options of ``df.write`` / ``df.writeStream`` (HTTP only: the broker appends)."""
    opts = _lowered(options)
    _check_known(opts, WRITE_OPTIONS, "writing")
    topic = _topic(opts)
    if opts.get("path"):
        raise OptionError("writing goes through a node's HTTP API: give url, not path")
    location = _location(opts, allow_path=False)
    acks = opts.get("acks", "all")
    if acks not in ACKS:
        raise OptionError(f"acks must be one of {', '.join(ACKS)}, not {acks!r}")
    batch_bytes = _optional_int(opts, "batchbytes", low=1024, high=WRITE_BATCH_BYTES_MAX)
    return WriteOptions(topic, location, acks, batch_bytes or WRITE_BATCH_BYTES_DEFAULT,
                        _bool(opts, "exactlyonce", default=True))


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if str(k).lower() not in SPARK_SET}


def _check_known(opts: Mapping[str, str], known: frozenset[str], what: str) -> None:
    unknown = sorted(set(opts) - known)
    if unknown:
        names = ", ".join(sorted(DISPLAY.get(k, k) for k in known))
        raise OptionError(f"unknown option(s) for {what}: {', '.join(unknown)}; known: {names}")


def _topic(opts: Mapping[str, str]) -> str:
    topic = opts.get("topic", "")
    if not topic:
        raise OptionError("the option topic is required (the topic to read or write)")
    if (len(topic) > TOPIC_NAME_CHARS_MAX or not set(topic) <= TOPIC_NAME_CHARS or topic in (".", "..")):
        raise OptionError(f"topic {topic!r} is not a valid topic name ([A-Za-z0-9._-], at most 200 characters)")
    return topic


def _location(opts: Mapping[str, str], *, allow_path: bool) -> Location:
    path, url = opts.get("path", ""), opts.get("url", "")
    timeout_s = _optional_float(opts, "timeoutseconds") or HTTP_TIMEOUT_S_DEFAULT
    if path and url:
        raise OptionError("give either path (data directories, read directly) or url (a node, over HTTP), not both")
    if not path and not url:
        wanted = "path (data directories) or url (a node's HTTP address)" if allow_path else "url (a node's address)"
        raise OptionError(f"say where the records are: {wanted}")
    token = opts.get("token") or None
    username, password = opts.get("username") or None, opts.get("password") or None
    ca_file = opts.get("cafile") or None
    keys_file = opts.get("encryptionkeysfile") or None
    if keys_file is not None and not path:
        raise OptionError("encryptionKeysFile is for a direct read of path: over url the node decrypts")
    if path:
        if token is not None or username is not None or password is not None or ca_file is not None:
            raise OptionError("token, username, password and caFile are for url (HTTP) access; a direct read of "
                              "path needs none (it reads files)")
        dirs = tuple(d.strip() for d in path.split(",") if d.strip())
        if not dirs:
            raise OptionError(f"path {path!r} names no directory")
        return Location(data_dirs=dirs, timeout_s=timeout_s, keys_file=keys_file)
    if not url.startswith(("http://", "https://")):
        raise OptionError(f"url must start with http:// or https://, not {url!r}")
    if ca_file is not None and not url.startswith("https://"):
        raise OptionError(f"caFile is the CA certificate of an https:// url, and url is {url!r}")
    if (username is None) != (password is None):
        raise OptionError("username and password go together")
    if token is not None and username is not None:
        raise OptionError("give either token or username and password, not both")
    return Location(url=url.rstrip("/"), token=token, timeout_s=timeout_s, username=username, password=password,
                    ca_file=ca_file)


def _offsets_option(opts: Mapping[str, str], name: str, topic: str, default: str, *, allow_latest: bool,
                    allow_earliest: bool) -> OffsetSpec:
    text = opts.get(name, default).strip()
    display = DISPLAY[name]
    if text in ("earliest", "latest"):
        if text == "earliest" and not allow_earliest:
            raise OptionError(f"{display} cannot be earliest (that would read nothing); use latest or JSON")
        return text  # type: ignore[return-value]
    return parse_offsets_json(text, topic, display, allow_earliest=allow_earliest, allow_latest=allow_latest)


def parse_offsets_json(text: str, topic: str, display: str, *, allow_earliest: bool = True,
                       allow_latest: bool = True) -> dict[int, int]:
    """``{"<topic>": {"<partition>": offset}}`` with -2 for earliest and -1 for latest (Kafka's form)."""
    shape = f'earliest, latest or JSON such as {{"{topic}": {{"0": 23, "1": -2}}}} (-2 earliest, -1 latest)'
    try:
        parsed = json.loads(text)
    except ValueError:
        raise OptionError(f"{display} must be {shape}, not {text!r}") from None
    if not isinstance(parsed, dict) or set(parsed) != {topic} or not isinstance(parsed[topic], dict):
        raise OptionError(f"{display} must be {shape} naming exactly the topic {topic!r}, not {text!r}")
    out: dict[int, int] = {}
    for key, value in parsed[topic].items():
        if not (isinstance(key, str) and key.isdigit()) or isinstance(value, bool) or not isinstance(value, int):
            raise OptionError(f"{display}: partition {key!r} -> {value!r} must be a partition number -> an offset")
        if value < EARLIEST or (value == EARLIEST and not allow_earliest) or (value == LATEST and not allow_latest):
            raise OptionError(f"{display}: offset {value} for partition {key} is not allowed here")
        out[int(key)] = value
    return out


def _optional_int(opts: Mapping[str, str], name: str, *, low: int, high: int | None = None) -> int | None:
    text = opts.get(name)
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(f"{DISPLAY.get(name, name)} must be an integer, not {text!r}") from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise OptionError(f"{DISPLAY.get(name, name)} must be {bound}, not {value}")
    return value


def _optional_float(opts: Mapping[str, str], name: str) -> float | None:
    text = opts.get(name)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise OptionError(f"{DISPLAY.get(name, name)} must be a number of seconds, not {text!r}") from None
    if not 0 < value <= 3600:
        raise OptionError(f"{DISPLAY.get(name, name)} must be above 0 and at most 3600, not {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, *, default: bool) -> bool:
    text = opts.get(name)
    if text is None:
        return default
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise OptionError(f"{DISPLAY.get(name, name)} must be true or false, not {text!r}")
