"""Load cluster and team YAML files, reporting the file, line and field of any mistake.

Built-in names (``reference``, ``demo``) resolve to the files shipped in ``deploy/``; anything else is a path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import ConfigError
from .model.cluster import ClusterConfig, Node, capacity_by_flavour
from .model.team import TeamsConfig

_M = TypeVar("_M", bound=BaseModel)


def deploy_dir() -> Path:
    """``deploy/`` of this checkout, or ``$SHOAL_DEPLOY_DIR`` when the package is installed elsewhere."""
    env = os.environ.get("SHOAL_DEPLOY_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / "deploy"


def resolve(kind: str, name_or_path: str) -> Path:
    """``("clusters", "demo")`` → ``deploy/clusters/demo.yaml``; a path is returned as it is."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        return candidate
    path = deploy_dir() / kind / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (deploy_dir() / kind).glob("*.yaml"))
        raise ConfigError(f"no built-in {kind[:-1]} named {name_or_path!r}; built-in: {', '.join(known)}, "
                          f"or give a path to a .yaml file")
    return path


def _lines(node: yaml.Node, path: tuple[Any, ...], out: dict[tuple[Any, ...], int]) -> None:
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _lines(value, path + (key.value,), out)
            out[path + (key.value,)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _lines(item, path + (index,), out)


def load_model(path: Path, model: type[_M]) -> _M:
    """Parse ``path`` as YAML and validate it as ``model``; every error names file, line and field."""
    where = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", path=where) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"not valid YAML: {getattr(exc, 'problem', exc)}", path=where,
                          line=mark.line + 1 if mark else None) from None
    if root is None or not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top of the file", path=where, line=1)
    lines: dict[tuple[Any, ...], int] = {}
    _lines(root, (), lines)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(error["loc"])
        line = None
        for cut in range(len(loc), -1, -1):
            if loc[:cut] in lines:
                line = lines[loc[:cut]]
                break
        field = ".".join(str(part) for part in loc) or None
        message = error["msg"].removeprefix("Value error, ")
        more = len(exc.errors()) - 1
        if more:
            message += f" (and {more} more error{'s' if more > 1 else ''})"
        raise ConfigError(message, path=where, line=line, field=field) from None


def load_cluster(name_or_path: str) -> tuple[ClusterConfig, list[Node]]:
    path = resolve("clusters", name_or_path)
    config = load_model(path, ClusterConfig)
    return config, config.expand()


def load_teams(name_or_path: str, nodes: list[Node] | None = None) -> TeamsConfig:
    """Load teams; with ``nodes``, also check that every quota names a flavour the cluster has."""
    path = resolve("teams", name_or_path)
    teams = load_model(path, TeamsConfig)
    if nodes is not None:
        capacity = capacity_by_flavour(nodes, include_spares=True)
        for team in teams.teams:
            for flavour in team.quotas:
                if flavour not in capacity:
                    raise ConfigError(f"team {team.name!r} has a quota of {flavour!r}, which this cluster "
                                      f"does not have (it has {', '.join(sorted(capacity))})", path=str(path))
    return teams
