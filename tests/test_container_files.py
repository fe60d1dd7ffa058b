"""The Dockerfile and docker-compose.yml stay in step with the code (no Docker engine runs here,
so they are checked by reading): every package is copied, every LOGBROKER_* variable they set is
a real setting, and the ports they publish are the ones the node listens on."""

from __future__ import annotations

import os
import re

import yaml

from logbroker.config import ENV_PREFIX, field_names
from tests.conftest import ROOT
from tests.test_layering import PACKAGES


def _read(name: str) -> str:
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def test_dockerfile_copies_every_package_and_sets_real_settings():
    dockerfile = _read("Dockerfile")
    copied = set(re.findall(r"^COPY (\w+) \./\1$", dockerfile, re.MULTILINE))
    assert copied >= set(PACKAGES)
    settings = set(re.findall(r"(LOGBROKER_[A-Z_]+)=", dockerfile))
    assert settings and settings <= {ENV_PREFIX + name.upper() for name in field_names()}
    assert 'ENTRYPOINT ["logbroker", "serve"]' in dockerfile and "EXPOSE 8080 9090" in dockerfile


def test_compose_file_is_valid_and_uses_real_settings():
    compose = yaml.safe_load(_read("docker-compose.yml"))
    service = compose["services"]["logbroker"]
    assert service["build"] == "."
    assert set(service["environment"]) <= {ENV_PREFIX + name.upper() for name in field_names()}
    assert service["environment"]["LOGBROKER_AUTH"] == "on"
    assert any(port.endswith(":8080") for port in service["ports"])
    volume = service["volumes"][0].split(":")[0]
    assert volume in compose["volumes"]
