"""One discovery for every client: arguments, then ``SHOAL_URL``/``SHOAL_TOKEN``, then the JupyterHub server's
environment, then the config file. A table of environments, and the SDK against a real server with nothing but a
hub's environment to go on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.client import AuthenticationFailed, ClientConfig, ShoalClient, Source, discover, hub_api_url
from scheduler_core.errors import ConfigError
from tests.scheduler_core.api.harness import Harness, running_harness

HUB = {"JUPYTERHUB_API_TOKEN": "hub-token", "JUPYTERHUB_PUBLIC_HUB_URL": "http://hub.example:8000/hub/",
       "JUPYTERHUB_PUBLIC_URL": "http://hub.example:8000/user/ana/", "JUPYTERHUB_BASE_URL": "/"}
SHOAL = {"SHOAL_URL": "http://from-env:2/", "SHOAL_TOKEN": "env-token"}
FILE = 'url = "http://from-file:1"\ntoken = "file-token"\n'

CASES = [
    # name, args, environment, config file, expected (url, token, url source, token source)
    ("nothing anywhere", (None, None), {}, None,
     ("http://127.0.0.1:8080", None, Source.DEFAULT, Source.NONE)),
    ("config file", (None, None), {}, FILE, ("http://from-file:1", "file-token", Source.FILE, Source.FILE)),
    ("hub beats the file", (None, None), HUB, FILE,
     ("http://hub.example:8000/services/shoal", "hub-token", Source.HUB, Source.HUB)),
    ("SHOAL_* beat the hub", (None, None), {**HUB, **SHOAL}, FILE,
     ("http://from-env:2", "env-token", Source.ENVIRONMENT, Source.ENVIRONMENT)),
    ("arguments beat everything", ("http://arg:3", "arg-token"), {**HUB, **SHOAL}, FILE,
     ("http://arg:3", "arg-token", Source.ARGUMENT, Source.ARGUMENT)),
    ("each value on its own: SHOAL_URL with the hub's token", (None, None),
     {**HUB, "SHOAL_URL": "http://from-env:2"}, None,
     ("http://from-env:2", "hub-token", Source.ENVIRONMENT, Source.HUB)),
    ("a hub token without a public URL: the file's URL", (None, None), {"JUPYTERHUB_API_TOKEN": "hub-token"},
     FILE, ("http://from-file:1", "hub-token", Source.FILE, Source.HUB)),
    ("empty variables count as unset", (None, None), {"SHOAL_URL": "", "SHOAL_TOKEN": "",
                                                      "JUPYTERHUB_PUBLIC_HUB_URL": ""}, FILE,
     ("http://from-file:1", "file-token", Source.FILE, Source.FILE)),
]


@pytest.mark.parametrize(("case", "args", "environ", "file", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_value_comes_from_the_first_place_that_has_it(tmp_path: Path, case: str,
                                                           args: tuple[str | None, str | None],
                                                           environ: dict[str, str], file: str | None,
                                                           expected: tuple[str, str | None, Source, Source]) -> None:
    path = tmp_path / "config"
    if file is not None:
        path.write_text(file)
    config = discover(*args, path=path, environ=environ)
    assert (config.url, config.token, config.url_source, config.token_source) == expected


HUB_URLS = [
    ({"JUPYTERHUB_PUBLIC_HUB_URL": "http://h:8000/hub/"}, "http://h:8000/services/shoal"),
    ({"JUPYTERHUB_PUBLIC_HUB_URL": "https://h/prefix/hub/"}, "https://h/prefix/services/shoal"),
    ({"JUPYTERHUB_PUBLIC_HUB_URL": "https://h/prefix/hub/", "JUPYTERHUB_BASE_URL": "/prefix/"},
     "https://h/prefix/services/shoal"),
    ({"JUPYTERHUB_PUBLIC_URL": "http://h:8000/user/ana/"}, "http://h:8000/services/shoal"),
    ({"JUPYTERHUB_PUBLIC_URL": "http://h:8000/jh/user/user/"}, "http://h:8000/jh/services/shoal"),
    ({"JUPYTERHUB_PUBLIC_HUB_URL": "http://h:1/hub/", "JUPYTERHUB_PUBLIC_URL": "http://other:2/user/a/"},
     "http://h:1/services/shoal"),
    ({"JUPYTERHUB_PUBLIC_HUB_URL": "not a url"}, None),
    ({"JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api"}, None),   # the hub's internal API is not the proxy
    ({}, None),
]


@pytest.mark.parametrize(("environ", "expected"), HUB_URLS)
def test_the_api_under_the_hub_is_found_from_its_public_address(environ: dict[str, str],
                                                                expected: str | None) -> None:
    assert hub_api_url(environ) == expected


def test_a_malformed_config_file_names_itself(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("url = 3\n")
    with pytest.raises(ConfigError, match="url must be a string"):
        discover(path=path, environ={})


@pytest.fixture
def api() -> Iterator[Harness]:
    yield from running_harness()


def test_the_sdk_finds_a_server_and_token_from_the_environment_alone(api: Harness, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SHOAL_URL", "SHOAL_TOKEN", "JUPYTERHUB_PUBLIC_HUB_URL", "JUPYTERHUB_PUBLIC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "shoal").mkdir()
    (tmp_path / "shoal" / "config").write_text(f'url = "{api.url}"\n')
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", api.users["bob"])
    with ShoalClient() as client:
        assert client.whoami().user == "bob"
        assert client.config == ClientConfig(api.url, api.users["bob"], Source.FILE, Source.HUB)
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN")
    with ShoalClient() as client, pytest.raises(AuthenticationFailed) as info:
        client.whoami()
    assert "no token found (set SHOAL_TOKEN" in info.value.message and "JUPYTERHUB_API_TOKEN" in info.value.message
