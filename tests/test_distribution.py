"""The distribution as a user installs it (decision 0279). The wheel, built from a copy of the
checkout, ships the broker's packages and not the benchmarks, the chaos harness, the simulation or the tests. Its
base install is the client: in a fresh virtual environment holding only the wheel and what its base
requirements pull in, the Python client and the CLI's client commands import and work against a
real node with no library of the server extra present, and ``serve`` says what to install. Each
make target installs the extras it needs, once."""

from __future__ import annotations

import email.parser
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import ROOT
from tests.support.distribution import SERVER_EXTRA, normalise, requirement_names, shipped_packages
from tests.support.nodes import NodeProcess
from tests.test_layering import PACKAGES, SERVER_LIBS

BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 60
# What a copy of the checkout leaves out: build products, caches, data and results.
NOT_SOURCE = (".git", ".venv", ".data", "results", "build", "*.egg-info", "__pycache__", ".mypy_cache",
              ".ruff_cache", ".pytest_cache", ".hypothesis")
JVM_JAR = "spark_connector/jvm/build/logbroker-spark-segments.jar"


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without what would put the checkout or another environment on sys.path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1", **extra}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source") / "logbroker"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    out = tmp_path_factory.mktemp("wheel")
    # The environment's setuptools builds it, so the test needs no index.
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation, "-w", str(out),
                    str(source)], check=True, capture_output=True, timeout=BUILD_TIMEOUT_S, env=_clean_env())
    (built,) = out.glob("logbroker-*.whl")
    return built


def _wheel_requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        headers = email.parser.Parser().parsestr(archive.read(metadata).decode())
    return [Requirement(line) for line in headers.get_all("Requires-Dist") or []]


def _base(requirements: Iterable[Requirement]) -> list[Requirement]:
    return [r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]


def _closure(requirements: Iterable[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """Every installed distribution the requirements pull in, transitively (markers evaluated)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    seen: set[tuple[str, str]] = set()
    todo = [(r, "") for r in requirements]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = normalise(requirement.name)
        for wanted in ("", *requirement.extras):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            dist = found.setdefault(name, importlib.metadata.distribution(requirement.name))
            todo += [(Requirement(line), wanted) for line in dist.requires or []]
    return found


def _copy_installed(dist: importlib.metadata.Distribution, site: Path) -> None:
    """Install ``dist`` into ``site`` by copying its recorded files (no index needed)."""
    for file in dist.files or ():
        source = Path(str(dist.locate_file(file)))
        if ".." in file.parts or not source.is_file():
            continue
        (site / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, site / file)


@pytest.fixture(scope="module")
def client_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment with the wheel (no extra) and exactly what its base requirements pull in."""
    venv = tmp_path_factory.mktemp("client") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=RUN_TIMEOUT_S)
    python = str(venv / "bin" / "python")
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True, env=_clean_env()).stdout.strip())
    for dist in _closure(_base(_wheel_requirements(wheel))).values():
        _copy_installed(dist, site)
    pip = [sys.executable, "-m", "pip", "--python", python]
    subprocess.run([*pip, "install", "--quiet", "--no-deps", "--no-index", str(wheel)], check=True,
                   capture_output=True, timeout=BUILD_TIMEOUT_S, env=_clean_env())
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=_clean_env())
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return venv


def test_the_wheel_ships_the_broker_and_not_the_harnesses(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == set(shipped_packages())
    harnesses = {"benchmarks", "chaos", "sim"}
    assert not top & {*harnesses, "tests"} and set(PACKAGES) - top == harnesses
    assert {"logbroker/client/__init__.py", "http_api/console_static/index.html", "grpc_api/broker.proto"} <= set(names)


def test_the_base_install_is_the_client_and_the_server_extra_holds_the_servers_libraries(wheel: Path) -> None:
    requirements = _wheel_requirements(wheel)
    base = {normalise(r.name) for r in _base(requirements)}
    server = {normalise(r.name) for r in requirements if r.marker and r.marker.evaluate({"extra": SERVER_EXTRA})}
    assert base == requirement_names() and server - base == requirement_names(SERVER_EXTRA)
    # SERVER_LIBS (the layering rules' import names) are exactly what the server extra installs.
    provided = {lib: {normalise(d) for d in importlib.metadata.packages_distributions().get(lib, [])}
                for lib in SERVER_LIBS}
    assert all(dists & requirement_names(SERVER_EXTRA) for dists in provided.values()), provided
    assert set().union(*provided.values()) >= requirement_names(SERVER_EXTRA)
    assert not set(_closure(_base(requirements))) & requirement_names(SERVER_EXTRA)


PROBE = """
import importlib.util, json, sys
import logbroker.client
client_loaded = sorted(sys.modules)
import logbroker.cli.command
print(json.dumps({"client": client_loaded, "cli": sorted(sys.modules), "file": logbroker.client.__file__,
                  "importable": [m for m in sys.argv[1:] if importlib.util.find_spec(m)]}))
"""


def test_a_client_only_install_imports_no_server_library(client_venv: Path, tmp_path: Path) -> None:
    done = subprocess.run([str(client_venv / "bin" / "python"), "-c", PROBE, *SERVER_LIBS, "benchmarks", "chaos", "sim",
                           "tests"], cwd=tmp_path, env=_clean_env(), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout)
    assert probe["file"].startswith(str(client_venv)), probe["file"]  # the installed copy, not the checkout
    assert probe["importable"] == [], probe["importable"]  # nothing of the server or the harnesses is there
    for loaded in (probe["client"], probe["cli"]):
        assert "logbroker.client" in loaded
        assert not {m for m in loaded if m.split(".")[0] in ("http_api", "grpc_api", "internal_rpc")}, loaded
    assert not {m for m in probe["client"] if m.startswith("logbroker.") and not m.startswith("logbroker.client")}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    process = NodeProcess(str(tmp_path_factory.mktemp("node")))
    with process:
        yield process


def test_a_client_only_install_runs_the_cli_against_a_real_node(client_venv: Path, node: NodeProcess,
                                                                tmp_path: Path) -> None:
    def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(client_venv / "bin" / "logbroker"), *args], input=stdin, cwd=tmp_path,
                              env=_clean_env(LOGBROKER_URL=node.url), capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)

    created = cli("topic", "create", "dist.t", "--partitions", "2")
    assert created.returncode == 0 and "created topic dist.t" in created.stdout, created.stderr
    assert "dist.t" in cli("topic", "list").stdout
    produced = cli("produce", "dist.t", "--partition", "1", stdin="alpha\nk\tbeta\n")
    assert produced.returncode == 0 and "produced 2 record(s)" in produced.stdout, produced.stderr
    consumed = cli("consume", "dist.t", "--from-beginning", "--print-key")
    assert consumed.returncode == 0 and consumed.stdout.splitlines() == ["\talpha", "k\tbeta"], consumed.stderr


def test_a_client_only_install_says_what_serving_needs(client_venv: Path, tmp_path: Path) -> None:
    logbroker = str(client_venv / "bin" / "logbroker")
    for args in (["serve", "--data-dir", str(tmp_path / "data"), "--http-port", "0", "--rpc-port", "0"],
                 ["certs", "--out", str(tmp_path / "certs")]):
        done = subprocess.run([logbroker, *args], cwd=tmp_path, env=_clean_env(), capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
        assert done.returncode == 1, done.stderr
        assert f"`{args[0]}` needs the server's dependencies" in done.stderr, done.stderr
        assert "pip install 'logbroker[server]'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "certs").exists()


def test_each_make_target_installs_the_extras_it_needs_once(tmp_path: Path) -> None:
    """make with stand-ins for the install script, Python and the linters: which extras each
    target installs, in a fresh environment, after another target, and after setup.cfg changed."""
    installs = tmp_path / "installs"
    bootstrap = tmp_path / "bootstrap"
    bootstrap.write_text(f'#!/bin/sh\nmkdir -p "$VENV/bin"\necho "$1" >> {installs}\n')
    venv = tmp_path / "venv"
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 0\n")
    for script in (bootstrap, fake):
        script.chmod(0o755)

    def make(target: str) -> list[str]:
        for tool in ("ruff", "mypy"):
            if venv.is_dir():
                shutil.copy2(fake, venv / "bin" / tool)
        subprocess.run(["make", "--no-print-directory", "-o", "system-deps", "-o", JVM_JAR, target,
                        f"VENV={venv}", f"PY={fake}", f"BOOTSTRAP={bootstrap}"], cwd=ROOT, check=True,
                       capture_output=True, timeout=RUN_TIMEOUT_S)
        done = installs.read_text().splitlines() if installs.exists() else []
        installs.unlink(missing_ok=True)
        return done

    assert make("run") == ["server"]
    assert make("test") == ["server,spark,test,docs"]
    assert [make(t) for t in ("run", "test", "spark-example", "cluster")] == [[], [], [], []]
    assert make("chaos") == ["server,bench"]
    assert make("lint") == ["server,spark,bench,test,dev"]
    for stamp in venv.glob(".installed-*"):  # older than setup.cfg: as after a change to it
        os.utime(stamp, (0, 0))
    assert make("spark-example") == ["spark"]
    assert make("run") == ["server"]
    assert make("bench-node") == ["server,spark,bench"]
