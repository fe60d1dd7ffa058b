"""``logbroker.launcher.serve_args``: a node's command line names each flag once (a default the
caller gives again is left out) and means what the old "defaults, then the caller's flags, the
last one winning" meant."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from logbroker.cli.command import build_parser
from logbroker.launcher import serve_args

DEFAULT_FLAGS = ("--node-id", "--data-dir", "--auth", "--http-host", "--http-port", "--rpc-port")
OTHER_FLAGS = ("--grpc-port", "--coordinator", "--rack", "--admin-user", "--lease-ttl-ms")


def flags(args: list[str]) -> list[str]:
    return [arg.partition("=")[0] for arg in args if arg.startswith("--")]


def test_a_default_given_again_is_left_out():
    args = serve_args("/d", 2, ("--auth", "on", "--http-port", "8082", "--grpc-port", "9095"))
    assert args == ["--node-id", "2", "--data-dir", "/d", "--http-host", "127.0.0.1", "--rpc-port", "0",
                    "--auth", "on", "--http-port", "8082", "--grpc-port", "9095"]
    assert serve_args("/d", 1, ()) == ["--node-id", "1", "--data-dir", "/d", "--auth", "off",
                                       "--http-host", "127.0.0.1", "--http-port", "0", "--rpc-port", "0"]
    assert "off" not in serve_args("/d", 1, ("--auth=on",))


values = st.text(st.characters(min_codepoint=ord("a"), max_codepoint=ord("z")), min_size=1, max_size=8)


@given(st.dictionaries(st.sampled_from(DEFAULT_FLAGS + OTHER_FLAGS), values, max_size=8))
def test_each_flag_once_and_the_same_meaning_as_defaults_then_extra(given_flags: dict[str, str]):
    extra = tuple(part for flag, value in given_flags.items() for part in (flag, value))
    args = serve_args("/data", 3, extra)
    assert len(flags(args)) == len(set(flags(args)))
    old = ["--auth", "off", "--http-host", "127.0.0.1", "--http-port", "0", "--rpc-port", "0", "--node-id", "3",
           "--data-dir", "/data", *extra]
    parser = build_parser()
    assert parser.parse_args(["serve", *args]) == parser.parse_args(["serve", *old])
