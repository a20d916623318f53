"""deploy/kubernetes renders offline (``kubectl kustomize``) and every object validates against the Kubernetes
OpenAPI schemas; the pieces agree with each other and with the code: RBAC grants exactly the calls the executor and
the spawner make (recorded by the fake API server), the Deployment's command parses as ``shoal up``, and the Zero to
JupyterHub values configure real ShoalSpawner traits that point at the rendered Service and namespace."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from scheduler_core.cli.up import command as up_command

from ..scheduler_core.kube.fake_cluster import K8S_VERSION

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
OVERLAYS = ["overlays/in-cluster-postgres", "overlays/external-postgres"]


def render(path: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: `kubectl kustomize` renders deploy/kubernetes offline")
    done = subprocess.run([kubectl, "kustomize", str(KUBE / path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(request.param)


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def test_every_object_validates_against_the_kubernetes_schemas(rendered: list[dict[str, Any]]) -> None:
    for obj in rendered:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    kinds = sorted({o["kind"] for o in rendered})
    assert {"Deployment", "Service", "Role", "ClusterRole", "PersistentVolumeClaim", "PodDisruptionBudget",
            "ConfigMap", "Secret", "Namespace"} <= set(kinds)


def test_in_cluster_postgres_adds_the_statefulset_and_builds_the_url_from_its_password() -> None:
    objects = render("overlays/in-cluster-postgres")
    find(objects, "StatefulSet", "shoal-postgres")
    env = {e["name"]: e for e in find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == find(objects, "Secret")["metadata"]["name"]
    names = list(env)
    assert names.index("PGPASSWORD") < names.index("SHOAL_DB")        # $(PGPASSWORD) expands only from earlier ones
    assert "$(PGPASSWORD)@shoal-postgres:5432" in env["SHOAL_DB"]["value"]


def test_external_postgres_takes_the_url_from_its_secret() -> None:
    objects = render("overlays/external-postgres")
    env = {e["name"]: e for e in find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]}
    secret = find(objects, "Secret")
    assert env["SHOAL_DB"]["valueFrom"]["secretKeyRef"] == {"name": secret["metadata"]["name"], "key": "url"}
    assert not any(o["kind"] == "StatefulSet" for o in objects)


def test_two_replicas_behind_one_service_scraped_by_prometheus(rendered: list[dict[str, Any]]) -> None:
    deployment = find(rendered, "Deployment", "shoal-scheduler")
    template = deployment["spec"]["template"]
    container = template["spec"]["containers"][0]
    assert deployment["spec"]["replicas"] == 2
    port = next(p["containerPort"] for p in container["ports"] if p["name"] == "http")
    assert template["metadata"]["annotations"] == {"prometheus.io/scrape": "true", "prometheus.io/port": str(port),
                                                   "prometheus.io/path": "/metrics"}
    service = find(rendered, "Service", "shoal-api")
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert find(rendered, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    claim = find(rendered, "PersistentVolumeClaim", "shoal-shared")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    assert volumes["shared"]["persistentVolumeClaim"]["claimName"] == "shoal-shared"


def test_the_deployment_command_is_a_valid_shoal_up(rendered: list[dict[str, Any]]) -> None:
    container = find(rendered, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    values = {"POD_NAMESPACE": "shoal", "JOB_IMAGE": "ghcr.io/example/shoal-job:0.1.0"}
    argv = [arg.replace("$(POD_NAMESPACE)", values["POD_NAMESPACE"]).replace("$(JOB_IMAGE)", values["JOB_IMAGE"])
            for arg in container["command"]]
    assert argv[:2] == ["shoal", "up"]
    context = up_command.make_context("up", argv[2:])
    params = context.params
    assert (params["executor_kind"], params["kube_namespace"], params["kube_shared_claim"]) == \
        ("kubernetes", "shoal", "shoal-shared")
    assert params["no_hub"] and params["hub_api_url"] == "http://hub.jupyterhub.svc:8081/hub/api"
    token = {e["name"]: e for e in container["env"]}["SHOAL_HUB_SERVICE_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert token == {"name": "shoal-hub-service", "key": "token", "optional": True}
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert params["kube_shared_path"] in mounts and str(Path(params["teams"]).parent) in mounts


def _rules(objects: list[dict[str, Any]], name: str) -> set[tuple[str, str]]:
    granted: set[tuple[str, str]] = set()
    for kind in ("Role", "ClusterRole"):
        for obj in objects:
            if obj["kind"] == kind and obj["metadata"]["name"].startswith(name):
                for rule in obj["rules"]:
                    granted.update((verb, resource) for verb in rule["verbs"] for resource in rule["resources"])
    return granted


def test_rbac_grants_exactly_the_calls_the_scheduler_and_the_hub_make(
        rendered: list[dict[str, Any]], used_by_shoal: tuple[set[tuple[str, str]], set[tuple[str, str]]]) -> None:
    scheduler, hub = used_by_shoal
    assert _rules(rendered, "shoal-scheduler") == scheduler
    assert _rules(rendered, "shoal-hub-secrets") == hub
    binding = find(rendered, "RoleBinding", "shoal-hub-secrets")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "hub", "namespace": "jupyterhub"}]


# -- Zero to JupyterHub ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    data = yaml.safe_load((KUBE / "jupyterhub" / "values.yaml").read_text())
    assert isinstance(data, dict)
    return data


def run_extra_config(values: dict[str, Any]) -> Any:
    from traitlets.config import Config
    config = Config()
    code = values["hub"]["extraConfig"]["shoal"]
    exec(compile(code, "values.yaml:hub.extraConfig.shoal", "exec"), {"c": config})  # noqa: S102 - our own file
    return config


def test_the_hub_config_uses_shoals_spawner_on_kubernetes_with_real_traits(values: dict[str, Any]) -> None:
    from hub_spawner import ShoalSpawner
    config = run_extra_config(values)
    assert values["hub"]["config"]["JupyterHub"]["spawner_class"] == "shoal"
    traits = set(ShoalSpawner.class_trait_names(config=True))
    assert set(config.ShoalSpawner) <= traits, set(config.ShoalSpawner) - traits
    assert config.ShoalSpawner.launcher == "kubernetes"
    assert [s["name"] for s in config.JupyterHub.services] == ["shoal", "shoal-reaper"]
    assert values["cull"]["enabled"] is False                    # Shoal's reaper culls, with GPU activity


def test_the_hub_points_at_the_rendered_service_and_namespace(values: dict[str, Any]) -> None:
    objects = render("overlays/in-cluster-postgres")
    config = run_extra_config(values)
    service = find(objects, "Service", "shoal-api")
    port = service["spec"]["ports"][0]["port"]
    namespace = service["metadata"]["namespace"]
    assert config.ShoalSpawner.shoal_url == f"http://shoal-api.{namespace}.svc:{port}"
    assert config.ShoalSpawner.namespace == namespace
    ingress = values["hub"]["networkPolicy"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]
    assert ingress == {"kubernetes.io/metadata.name": namespace}


def test_the_dockerfile_builds_the_three_images_the_manifests_name() -> None:
    dockerfile = (KUBE / "docker" / "Dockerfile").read_text()
    stages = {line.split(" AS ")[1].strip() for line in dockerfile.splitlines() if line.startswith("FROM ")}
    assert stages == {"scheduler", "hub", "notebook"}
    images = {o["spec"]["template"]["spec"]["containers"][0]["image"].split(":")[0]
              for o in render("overlays/external-postgres") if o["kind"] == "Deployment"}
    assert images == {"ghcr.io/example/shoal"}


# -- what Shoal really calls ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def used_by_shoal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[set[tuple[str, str]],
                                                                             set[tuple[str, str]]]]:
    """Drive the executor (launch, report, checkpoint, stop, adopt, collect ended gangs) and the spawner's Secrets
    through the fake API server, and return the (verb, resource) pairs each used."""
    import asyncio

    from hub_spawner.kube import NotebookSecrets
    from scheduler_core.executor.base import PodEventKind
    from scheduler_core.kube.logs import KubePodLogReader

    from ..scheduler_core.executor_contract import Behaviour, Watch
    from ..scheduler_core.kube.harness import NAMESPACE, KubeHarness

    harness = KubeHarness(tmp_path_factory.mktemp("rbac"), keep_finished_s=0.5, collect_every_s=0.0)
    try:
        watch = Watch(harness)
        harness.executor.launch(harness.request("job_rbac", Behaviour.RUNS_UNTIL_SIGNALLED))
        watch.until(watch.all_ranks("job_rbac", PodEventKind.STARTED, 2), "the gang to start")
        harness.executor.request_checkpoint("job_rbac")
        reader = KubePodLogReader(harness.cluster.api_client(), NAMESPACE)
        watch.until(lambda: "from step" in reader.read("job_rbac", 0, 0).text, "rank 0's output")   # %%gpujob
        second = harness.reopen()
        second.adopt({"job_rbac"})
        second.terminate("job_rbac", harness.grace_s)
        watch = Watch(harness, second)
        watch.until(watch.ended("job_rbac", 2), "the gang to end")
        watch.until(lambda: harness.cluster.objects("services", NAMESPACE) == [],
                    "the ended gang to be collected after keep_finished_s")
        scheduler = harness.cluster.verbs()
        harness.cluster.requests.clear()
        secrets = NotebookSecrets(harness.cluster.api_client(), NAMESPACE)
        asyncio.run(secrets.put("job_nb", {"JUPYTERHUB_API_TOKEN": "t"}))
        asyncio.run(secrets.put("job_nb", {"JUPYTERHUB_API_TOKEN": "u"}))   # a second spawn replaces it
        asyncio.run(secrets.delete("job_nb"))
        yield scheduler, harness.cluster.verbs()
    finally:
        harness.close()


def test_the_hub_registers_the_scheduler_with_its_url_and_the_token_the_scheduler_is_given(
        values: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    rendered = render("overlays/in-cluster-postgres")
    container = find(rendered, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    scheduler = {e["name"]: e for e in container["env"]}["SHOAL_HUB_SERVICE_TOKEN"]["valueFrom"]["secretKeyRef"]
    hub = values["hub"]["extraEnv"]["SHOAL_HUB_SERVICE_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert hub == scheduler                       # one Secret, created in both namespaces (docs/deploy.md)
    monkeypatch.setenv("SHOAL_HUB_SERVICE_TOKEN", "the-token")
    shoal = run_extra_config(values).JupyterHub.services[0]
    assert (shoal["url"], shoal["api_token"], shoal["oauth_no_confirm"]) == (
        "http://shoal-api.shoal.svc:8080", "the-token", True)
