"""What can be checked of deploy/ without Docker or Kubernetes.

The compose files against the Compose Specification's JSON schema (shipped by
check-jsonschema), every Kubernetes manifest against Kubernetes' own schemas (shipped by
kubernetes-validate), and the files against the service: every command a real ``domino``
subcommand with real options, every variable a setting the service reads, every Prometheus
target a compose service's metrics port, every dashboard query valid PromQL over the metrics
the services export, probes on the contract's paths, limits and a locked-down user on every
container, images pinned, and the image's lock file in step with the project's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import time
import tomllib
from collections.abc import Iterator
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import promql_parser
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from services.cli.main import build_parser
from services.config import ENV
from services.gateway.config import ENV as GATEWAY_ENV
from services.metrics import GROUPS
from services.redis import acl
from services.redis.apps import consumer_name
from services.redis.servers import server_binary
from tests.support.tools import missing

pytestmark = pytest.mark.service

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
COMPOSE_FILES = ("compose.yaml", "compose.single.yaml")
SERVICE_SETTINGS = set(ENV.values())
GATEWAY_SETTINGS = SERVICE_SETTINGS | set(GATEWAY_ENV.values())
LEASED = ("referee", "projector")
"""The roles whose processes share the partitions by lease (docs/architecture.md)."""
NAMED_BY_HOST = (*LEASED, "bots")
"""The roles whose processes each need a name of their own: a lease holder, a group's consumer."""
KUBERNETES_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
"""The oldest Kubernetes the manifests are for, and the newest the schemas know."""


# -- reading the files -------------------------------------------------------------------------


def load(path: Path) -> Any:
    """One YAML document (YAML merge keys resolved, as Compose resolves them)."""
    return yaml.safe_load(path.read_text())


def compose(name: str = "compose.yaml") -> dict[str, Any]:
    data: dict[str, Any] = load(DEPLOY / name)
    return data


def project_version() -> str:
    version: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return version


def domino_services(name: str) -> dict[str, dict[str, Any]]:
    """The services of a compose file that run the domino image."""
    return {
        service: spec
        for service, spec in compose(name)["services"].items()
        if spec.get("image", "").startswith("domino:")
    }


def metrics_port(environment: dict[str, str]) -> int:
    return int(environment["DOMINO_METRICS_PORT"])


def kustomization(directory: Path = K8S) -> dict[str, Any]:
    data: dict[str, Any] = load(directory / "kustomization.yaml")
    return data


def manifests(directory: Path = K8S) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each resource of a kustomization (following a directory to its own), with its file."""
    for resource in kustomization(directory)["resources"]:
        path = (directory / resource).resolve()
        if path.is_dir():
            yield from manifests(path)
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if document is not None:
                yield path.relative_to(DEPLOY).as_posix(), document


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    found = {doc["metadata"]["name"]: doc for _, doc in manifests() if doc["kind"] == kind}
    return found


def pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    for name, deployment in of_kind("Deployment").items():
        yield name, deployment["spec"]["template"]["spec"]


def config_maps() -> dict[str, dict[str, str]]:
    return {name: doc["data"] for name, doc in of_kind("ConfigMap").items()}


def container_env(container: dict[str, Any]) -> dict[str, str | None]:
    """The variables a container gets: from its config maps, then its own (a secret's: None)."""
    maps = config_maps()
    env: dict[str, str | None] = {}
    for source in container.get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]])
    for var in container.get("env", []):
        env[var["name"]] = var.get("value")
    return env


# -- the compose files -------------------------------------------------------------------------


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_the_compose_file_follows_the_compose_specification(name: str) -> None:
    vendored = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema = json.loads(vendored.joinpath("compose-spec.json").read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(compose(name))
    ]
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_every_compose_command_is_a_real_domino_subcommand_with_real_options(name: str) -> None:
    parser = build_parser()
    services = domino_services(name)
    assert {"referee", "bots-random", "bots-greedy", "projector", "gateway"} <= set(services)
    for service, spec in services.items():
        try:
            parser.parse_args(spec["command"])
        except SystemExit:
            pytest.fail(f"{service}: 'domino {shlex.join(spec['command'])}' is not a command")


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_every_setting_compose_passes_is_one_the_service_reads(name: str) -> None:
    for service, spec in domino_services(name).items():
        known = GATEWAY_SETTINGS if spec["command"][0] == "gateway" else SERVICE_SETTINGS
        assert set(spec["environment"]) <= known, service


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_every_domino_service_serves_metrics_and_is_health_checked_on_healthz(name: str) -> None:
    for service, spec in domino_services(name).items():
        env = spec["environment"]
        assert env["DOMINO_METRICS_HOST"] == "0.0.0.0", service
        port = metrics_port(env)
        if spec["command"][0] == "gateway":
            assert env["DOMINO_GATEWAY_HOST"] == "0.0.0.0"
            port = int(env["DOMINO_GATEWAY_PORT"])
        assert f"http://127.0.0.1:{port}/healthz" in " ".join(spec["healthcheck"]["test"]), service
        assert spec["read_only"] is True, service
        limits = spec["deploy"]["resources"]["limits"]
        assert limits["cpus"] and limits["memory"], service


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_every_image_is_pinned_and_the_domino_image_is_the_project_version(name: str) -> None:
    for service, spec in compose(name)["services"].items():
        image = spec["image"]
        assert re.search(r":v?\d+\.\d+\.\d+$|@sha256:[0-9a-f]{64}$", image), (service, image)
    for spec in domino_services(name).values():
        assert spec["image"] == f"domino:{project_version()}"
        assert spec["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}


def redis_conf() -> dict[str, str]:
    lines = (DEPLOY / "redis" / "cluster.conf").read_text().splitlines()
    pairs = (line.split(None, 1) for line in lines if line.strip() and not line.startswith("#"))
    return {key: value for key, value in pairs}


def test_compose_runs_a_redis_cluster_of_three_masters_and_three_replicas_with_aof() -> None:
    services = compose()["services"]
    conf = redis_conf()
    assert conf["cluster-enabled"] == "yes"
    assert conf["appendonly"] == "yes"
    assert conf["appendfsync"] in ("everysec", "always")
    assert conf["maxmemory-policy"] == "noeviction"  # the match log is never evicted
    nodes = sorted(name for name in services if re.fullmatch(r"redis-\d+", name))
    assert len(nodes) == 6
    for node in nodes:
        spec = services[node]
        command = spec["command"]
        assert command[:2] == ["redis-server", "/usr/local/etc/redis/redis.conf"], node
        assert command[command.index("--cluster-announce-hostname") + 1] == node
        assert "./redis/cluster.conf:/usr/local/etc/redis/redis.conf:ro" in spec["volumes"]
        assert f"{node}:/data" in spec["volumes"], f"{node} keeps its own data"
        assert "redis-cli" in spec["healthcheck"]["test"]

    init = services["redis-cluster-init"]
    assert init["restart"] == "no"
    assert init["depends_on"] == {node: {"condition": "service_healthy"} for node in nodes}
    script, *members = init["command"][1:]
    assert f"./redis/cluster-init.sh:{script}:ro" in init["volumes"]
    assert members == [f"{node}:{conf['port']}" for node in nodes]
    assert "--cluster-replicas 1 --cluster-yes" in (DEPLOY / "redis/cluster-init.sh").read_text()


def test_compose_services_wait_for_the_cluster_and_know_it_is_one() -> None:
    services = compose()["services"]
    conf = redis_conf()
    for service, spec in domino_services("compose.yaml").items():
        assert spec["depends_on"] == {
            "redis-cluster-init": {"condition": "service_completed_successfully"}
        }, service
        env = spec["environment"]
        assert env["DOMINO_REDIS_CLUSTER"] == "1", service
        url = re.fullmatch(r"redis://([\w-]+):(\d+)", env["REDIS_URL"])
        assert url, service
        host, port = url.groups()
        assert host in services and "cluster-announce-hostname" in str(services[host]["command"])
        assert port == conf["port"]
    assert services["referee"]["deploy"]["replicas"] == 2


def test_the_single_node_compose_runs_redis_with_aof_and_two_referees() -> None:
    services = compose("compose.single.yaml")["services"]
    command = services["redis"]["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--appendfsync") + 1] in ("everysec", "always")
    assert services["referee"]["deploy"]["replicas"] == 2
    for service, spec in domino_services("compose.single.yaml").items():
        assert re.fullmatch(r"redis://redis:6379/\d+", spec["environment"]["REDIS_URL"])
        assert spec["environment"].get("DOMINO_REDIS_CLUSTER", "0") == "0", service


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_compose_scales_referees_and_projectors_each_replica_named_by_its_own_host(
    name: str,
) -> None:
    """Referees and projectors share the partitions by lease, so both run several replicas,
    each a lease holder of its own: named by its container's host name and its pid (the
    default), never by a ``--name``, a ``hostname`` or a ``container_name`` every replica
    would share. Bot workers, consumers of one group, are named the same way."""
    parser = build_parser()
    for service, spec in domino_services(name).items():
        role = spec["command"][0]
        if role in LEASED:
            assert spec["deploy"]["replicas"] >= 2, service
        if role in NAMED_BY_HOST:
            assert parser.parse_args(spec["command"]).name is None, service
            assert "hostname" not in spec and "container_name" not in spec, service
    assert {spec["command"][0] for spec in domino_services(name).values()} >= set(LEASED)


def test_the_cluster_init_script_is_valid_sh() -> None:
    script = DEPLOY / "redis" / "cluster-init.sh"
    subprocess.run(["sh", "-n", str(script)], check=True)


def _free_ports(count: int) -> list[int]:
    """Ports free now, each with its cluster bus port (port + 10000) free too."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port > 55535 or port in ports:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        ports.append(port)
    return ports


def _wait_listening(node: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Return once ``port`` takes connections; fail with the node's log if it exits first."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if node.poll() is not None:
            pytest.fail(f"redis-server on {port} exited:\n{log.read_text()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    pytest.fail(f"redis-server on {port} did not listen within 10 s:\n{log.read_text()}")


def test_the_cluster_init_script_makes_a_cluster_once_and_leaves_it_after(
    tmp_path: Path,
) -> None:
    binary = server_binary()
    cli = shutil.which("redis-cli", path=str(Path(binary).parent)) if binary else None
    if binary is None or cli is None or shutil.which("getent") is None:
        missing("needs redis-server and redis-cli side by side, and getent")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    # A Redis of 7 or later reads the nodes' own configuration (its endpoint settings are
    # new in 7); an older one, the same settings that matter here given one by one.
    major = re.search(r"v=(\d+)\.", version)
    assert major, version
    if int(major[1]) >= 7:
        conf = [str(DEPLOY / "redis" / "cluster.conf"), "--cluster-announce-hostname", "localhost"]
    else:
        conf = ["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"]
    nodes: list[subprocess.Popen[bytes]] = []
    ports = _free_ports(6)
    try:
        for port in ports:
            directory = tmp_path / str(port)
            directory.mkdir()
            # on the loopback address only, and in this test's directory
            here = ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)]
            with (directory / "log").open("wb") as log:
                node = subprocess.Popen(
                    [binary, *conf, *here, "--save", ""], stdout=log, stderr=subprocess.STDOUT
                )
            nodes.append(node)
        for node, port in zip(nodes, ports, strict=True):
            _wait_listening(node, port, tmp_path / str(port) / "log")
        env = {**os.environ, "PATH": f"{Path(cli).parent}{os.pathsep}{os.environ['PATH']}"}
        command = ["sh", str(DEPLOY / "redis/cluster-init.sh")]
        command += [f"127.0.0.1:{port}" for port in ports]
        first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        assert first.returncode == 0, first.stdout + first.stderr
        assert "All 16384 slots covered" in first.stdout
        again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "the cluster exists already" in again.stdout
        deadline = time.monotonic() + 10  # the last node may hear of the others a moment later
        while True:
            info = subprocess.run(
                [cli, "-p", str(ports[-1]), "cluster", "info"], capture_output=True, text=True
            ).stdout.split()
            if "cluster_known_nodes:6" in info or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert "cluster_state:ok" in info
        assert "cluster_size:3" in info, "three masters serve the slots"
        assert "cluster_known_nodes:6" in info
    finally:
        for node in nodes:
            node.terminate()
        for node in nodes:
            node.wait(10)


# -- Prometheus and Grafana --------------------------------------------------------------------


def scrape_targets() -> list[tuple[str, str, int]]:
    """(job, host, port) of every target in prometheus.yml."""
    targets = []
    for job in load(DEPLOY / "prometheus" / "prometheus.yml")["scrape_configs"]:
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                host, port = target.rsplit(":", 1)
                targets.append((job["job_name"], host, int(port)))
        for dns in job.get("dns_sd_configs", []):
            assert dns["type"] == "A"
            targets += [(job["job_name"], host, dns["port"]) for host in dns["names"]]
    return targets


def test_prometheus_scrapes_every_domino_service_on_its_metrics_port_and_nothing_else() -> None:
    services = compose()["services"]
    domino = domino_services("compose.yaml")
    scraped = set()
    for job, host, port in scrape_targets():
        if host == "localhost":
            assert (job, port) == ("prometheus", 9090)
            continue
        assert host in domino, f"{job}: {host} is no domino service of compose.yaml"
        assert port == metrics_port(domino[host]["environment"]), (job, host)
        scraped.add(host)
    assert scraped == set(domino)
    prometheus = services["prometheus"]
    assert "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]


def mount(service: dict[str, Any], source: str) -> str:
    """Where a compose service mounts ``source`` (a path relative to deploy/)."""
    for volume in service["volumes"]:
        parts = volume.split(":")
        if parts[0] == source:
            return parts[1]
    raise AssertionError(f"{source} is not mounted")


def test_grafana_provisions_the_compose_prometheus_and_the_dashboards_folder() -> None:
    services = compose()["services"]
    grafana = services["grafana"]
    provisioning = DEPLOY / "grafana" / "provisioning"
    assert mount(grafana, "./grafana/provisioning") == "/etc/grafana/provisioning"
    (source,) = load(provisioning / "datasources" / "prometheus.yaml")["datasources"]
    assert source["type"] == "prometheus"
    assert source["url"] == "http://prometheus:9090"
    assert "9090:9090" in services["prometheus"]["ports"][0]
    (provider,) = load(provisioning / "dashboards" / "domino.yaml")["providers"]
    assert provider["options"]["path"] == mount(grafana, "./grafana/dashboards")
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == provider["options"]["path"] + "/domino.json"


def dashboards() -> Iterator[tuple[str, dict[str, Any]]]:
    paths = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))
    assert paths
    for path in paths:
        yield path.name, json.loads(path.read_text())


def exported_metrics() -> dict[str, str]:
    """Every metric the services export (services/metrics.py) and its type."""
    found = {}
    for collectors in GROUPS.values():
        for collector in collectors:
            for family in collector.describe():
                name = family.name + ("_total" if family.type == "counter" else "")
                found[name] = family.type
    return found


def queried_metrics(expr: str) -> set[str]:
    """The metric names a PromQL expression selects; raises ValueError if it does not parse.
    Grafana's own variables are given a value first, as Grafana does."""
    tree = promql_parser.parse(expr.replace("$__rate_interval", "1m"))
    names: set[str] = set()

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)

    promql_parser.walk(tree, visit)
    return names


def test_every_dashboard_query_is_promql_over_metrics_the_services_export() -> None:
    exported = exported_metrics()
    queried: set[str] = set()
    for name, dashboard in dashboards():
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                where = f"{name}: {panel['title']}"
                selected = queried_metrics(target["expr"])
                assert selected, where
                # loosely too, as a person reads it: every domino_ name in the text
                assert set(re.findall(r"domino_[a-z_]+", target["expr"])) == selected, where
                for metric in selected:
                    base = re.sub(r"_(bucket|sum|count)$", "", metric)
                    assert metric in exported or exported.get(base) == "histogram", (where, metric)
                    if exported.get(base) == "histogram":
                        assert metric != base, f"{where}: a histogram is read by its series"
                    queried.add(base if exported.get(base) == "histogram" else metric)
    assert queried == set(exported), "every exported metric is on a dashboard"


def test_the_dashboard_shows_what_an_operator_asks_for() -> None:
    (_, dashboard), *_ = dashboards()
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    wanted = [
        r"sum by \(partition\) \(rate\(domino_moves_decided_total",
        r"histogram_quantile\(0\.5, .*domino_command_to_turn_seconds_bucket",
        r"histogram_quantile\(0\.99, .*domino_command_to_turn_seconds_bucket",
        r"domino_decide_seconds_bucket",
        r"domino_append_seconds_bucket",
        r"sum by \(group\) .*domino_consumer_lag",
        r"sum by \(group\) .*domino_consumer_pending",
        r"domino_dead_letters",
        r"domino_leases_held",
        r"domino_live_matches",
        r"sum by \(status\) \(rate\(domino_gateway_requests_total",
        r"domino_gateway_open_streams",
        r"rate\(domino_gateway_rate_limited_total",
    ]
    for pattern in wanted:
        assert any(re.search(pattern, e) for e in exprs), pattern


def test_dashboard_panels_have_unique_ids_and_places_and_read_the_chosen_prometheus() -> None:
    for name, dashboard in dashboards():
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids)), name
        cells: set[tuple[int, int]] = set()
        for panel in dashboard["panels"]:
            grid = panel["gridPos"]
            assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
            mine = {
                (x, y)
                for x in range(grid["x"], grid["x"] + grid["w"])
                for y in range(grid["y"], grid["y"] + grid["h"])
            }
            assert not mine & cells, f"{name}: {panel['title']} overlaps another panel"
            cells |= mine
            if panel["type"] != "row":
                assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
                assert panel["targets"], panel["title"]


# -- Kubernetes --------------------------------------------------------------------------------


def test_the_kustomizations_list_every_manifest_and_only_files_that_exist() -> None:
    listed = set(kustomization()["resources"])
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == files
    overlay = kustomization(K8S / "ingress")
    assert overlay["resources"][0] == ".."
    for resource in overlay["resources"][1:]:
        assert (K8S / "ingress" / resource).is_file(), resource
    assert overlay["namespace"] == kustomization()["namespace"]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_kubernetes_manifest_follows_the_kubernetes_schema(version: str) -> None:
    errors, checked = [], 0
    for path, document in manifests(K8S / "ingress"):
        what = f"{path} {document['kind']}/{document['metadata']['name']}"
        try:
            kubernetes_validate.validate(document, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            errors.append(f"{what}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
        checked += 1
    assert not errors, "\n".join(errors)
    assert checked >= 10


def test_no_secret_value_is_kept_only_references_to_one() -> None:
    assert not of_kind("Secret")
    for name, spec in pod_specs():
        for container in spec["containers"]:
            for var in container.get("env", []):
                assert "value" not in var or not var["name"].endswith("TOKEN"), name
                if "valueFrom" in var:
                    assert var["valueFrom"]["secretKeyRef"]["name"] == "domino-secrets"
    (gateway,) = dict(pod_specs())["gateway"]["containers"]
    refs = {v["name"]: v["valueFrom"]["secretKeyRef"]["key"] for v in gateway["env"]}
    assert refs == {"REDIS_URL": "redis-url-gateway", "DOMINO_OPERATOR_TOKEN": "operator-token"}


def test_every_pod_signs_in_to_redis_as_the_acl_user_of_its_role() -> None:
    """Each container's REDIS_URL is the secret key of its own role's user (services/redis/
    acl.py): a bot worker's pod never holds credentials that read a match log."""
    seen = set()
    for name, spec in pod_specs():
        for container in spec["containers"]:
            args = container["args"]
            user = f"bots-{args[args.index('--strategy') + 1]}" if args[0] == "bots" else args[0]
            assert user in acl.users(), (name, user)
            refs = {v["name"]: v["valueFrom"]["secretKeyRef"]["key"] for v in container["env"]}
            assert refs["REDIS_URL"] == f"redis-url-{user}", name
            seen.add(user)
    assert {"referee", "projector", "gateway", "bots-random"} <= seen


def test_every_kubernetes_container_runs_a_real_domino_command_with_settings_it_reads() -> None:
    parser = build_parser()
    commands = set()
    for name, spec in pod_specs():
        for container in spec["containers"]:
            assert "command" not in container, f"{name}: the image's entrypoint is domino"
            try:
                parser.parse_args(container["args"])
            except SystemExit:
                pytest.fail(f"{name}: 'domino {shlex.join(container['args'])}' is not a command")
            known = GATEWAY_SETTINGS if container["args"][0] == "gateway" else SERVICE_SETTINGS
            env = container_env(container)
            assert set(env) <= known, (name, set(env) - known)
            assert env["DOMINO_REDIS_CLUSTER"] == "1" and "REDIS_URL" in env, name
            commands.add(container["args"][0])
    assert commands == {"referee", "bots", "projector", "gateway"}
    assert set(config_maps()["domino-settings"]) <= SERVICE_SETTINGS
    assert set(config_maps()["domino-gateway-settings"]) <= GATEWAY_SETTINGS


def quantity(value: str | int) -> float:
    """A Kubernetes quantity (500m, 2, 256Mi, 1Gi) as a number."""
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(m|Ki|Mi|Gi)?", str(value))
    assert match, value
    return float(match[1]) * units.get(match[2] or "", 1)


def test_every_container_is_probed_limited_and_runs_as_a_non_root_user_on_a_read_only_root() -> (
    None
):
    user = _dockerfile_user()
    for name, spec in pod_specs():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["runAsUser"] == user, name
        assert spec["automountServiceAccountToken"] is False, name
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"]["drop"] == ["ALL"], name
            assert {m["mountPath"] for m in container["volumeMounts"]} == {"/tmp"}, name
            resources = container["resources"]
            for amount in ("cpu", "memory"):
                request = quantity(resources["requests"][amount])
                assert 0 < request <= quantity(resources["limits"][amount]), (name, amount)
            ports = {p["name"]: p["containerPort"] for p in container["ports"]}
            env = container_env(container)
            assert ports["metrics"] == int(env["DOMINO_METRICS_PORT"] or 0), name
            assert env["DOMINO_METRICS_HOST"] == "0.0.0.0", name
            probed = "metrics"
            if container["args"][0] == "gateway":
                assert ports["http"] == int(env["DOMINO_GATEWAY_PORT"] or 0)
                assert env["DOMINO_GATEWAY_HOST"] == "0.0.0.0"
                probed = "http"
            for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
                assert container[probe]["httpGet"] == {"path": path, "port": probed}, name


def test_every_pod_is_scraped_on_its_metrics_port() -> None:
    for name, deployment in of_kind("Deployment").items():
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert annotations["prometheus.io/scrape"] == "true", name
        assert annotations["prometheus.io/path"] == "/metrics", name
        assert int(annotations["prometheus.io/port"]) == ports["metrics"], name


def test_deployments_select_their_own_pods_and_referees_projectors_and_gateways_have_budgets() -> (
    None
):
    deployments = of_kind("Deployment")
    selectors = {}
    for name, deployment in deployments.items():
        selector = deployment["spec"]["selector"]["matchLabels"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items(), name
        selectors[name] = selector
    for name, selector in selectors.items():
        for other, labels in selectors.items():
            if other != name:
                assert not selector.items() <= labels.items(), f"{name} would select {other}"
    assert deployments["referee"]["spec"]["replicas"] == 2
    assert {n for n in deployments if n.startswith("bots-")} == {
        "bots-random",
        "bots-greedy",
        "bots-search",
    }
    budgets = of_kind("PodDisruptionBudget")
    assert set(budgets) == {"referee", "projector", "gateway"}
    for name, budget in budgets.items():
        assert budget["spec"]["selector"]["matchLabels"] == selectors[name]
        assert budget["spec"]["minAvailable"] < deployments[name]["spec"]["replicas"]


def test_referees_and_projectors_scale_each_pod_named_by_its_own_host() -> None:
    """As in compose: several replicas of each role that shares the partitions by lease,
    rolled out as any Deployment (two at once is how they run), spread over nodes, each pod a
    lease holder named by its host name — the pod's own name — and its pid: no ``--name``
    and no ``hostname`` every replica would share."""
    parser = build_parser()
    deployments = of_kind("Deployment")
    leased = set()
    for name, deployment in deployments.items():
        spec = deployment["spec"]
        (container,) = spec["template"]["spec"]["containers"]
        role = container["args"][0]
        if role in LEASED:
            leased.add(role)
            assert spec["replicas"] >= 2, name
            assert spec.get("strategy", {}).get("type", "RollingUpdate") == "RollingUpdate"
            (spread,) = spec["template"]["spec"]["topologySpreadConstraints"]
            assert spread["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
        if role in NAMED_BY_HOST:
            assert parser.parse_args(container["args"]).name is None, name
            assert "hostname" not in spec["template"]["spec"], name
    assert leased == set(LEASED)


def test_a_process_named_by_default_is_named_by_its_host_and_pid() -> None:
    """What the deployments rely on for a name of each replica's own (services/redis/apps.py)."""
    assert consumer_name("projector") == f"projector-{socket.gethostname()}-{os.getpid()}"


def test_the_gateway_service_and_ingress_reach_the_gateways_http_port() -> None:
    service = of_kind("Service")["gateway"]
    (container,) = dict(pod_specs())["gateway"]["containers"]
    gateway = of_kind("Deployment")["gateway"]
    assert service["spec"]["selector"] == gateway["spec"]["selector"]["matchLabels"]
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
    ingress = load(K8S / "ingress" / "ingress.yaml")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "gateway", "port": {"name": port["name"]}}


def test_the_kubernetes_image_is_the_project_version() -> None:
    (image,) = kustomization()["images"]
    assert image == {"name": "domino", "newTag": project_version()}
    for name, spec in pod_specs():
        for container in spec["containers"]:
            assert container["image"] == f"domino:{project_version()}", name


# -- the image ---------------------------------------------------------------------------------


def _dockerfile() -> str:
    return (DEPLOY / "Dockerfile").read_text()


def _instruction(name: str) -> list[str]:
    lines = [line for line in _dockerfile().splitlines() if line.startswith(name + " ")]
    assert len(lines) == 1, name
    value: list[str] = json.loads(lines[0][len(name) + 1 :])
    return value


def _dockerfile_user() -> int:
    (line,) = [line for line in _dockerfile().splitlines() if line.startswith("USER ")]
    user, _, group = line.split()[1].partition(":")
    assert user.isdigit() and int(user) > 0, "a numeric user, not root"
    assert not group or group.isdigit()
    return int(user)


def test_the_image_runs_the_domino_console_script_and_copies_what_exists() -> None:
    dockerfile = _dockerfile()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert _instruction("ENTRYPOINT") == ["domino"]
    assert project["scripts"]["domino"] == "services.cli.main:main"
    build_parser().parse_args(_instruction("CMD"))
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source
                # the ignore file lets in nothing but what is named: each source must be
                assert f"!{source}" in ignored or f"!{source}/" in ignored, source


def test_the_image_is_a_pinned_python_of_the_locks_version_run_as_a_non_root_user() -> None:
    (base,) = [line.split()[1] for line in _dockerfile().splitlines() if line.startswith("FROM ")]
    header = (DEPLOY / "requirements.lock").read_text()
    python = re.search(r"--python-version (\d+\.\d+)", header)
    assert python, "the lock says which Python it is for"
    assert re.fullmatch(rf"python:{re.escape(python[1])}\.\d+-slim-\w+", base), base
    assert _dockerfile_user() >= 1000
    assert "pip install --no-cache-dir --no-deps -r requirements.lock" in _dockerfile()


def pins(path: Path) -> dict[str, str]:
    found = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", path.read_text(), re.M)
    return {canonicalize_name(name): version for name, version in found}


def runtime_requirements(python: str, *roots: str) -> set[str]:
    """Every distribution the installed ``roots`` need at run time (no extras of their own),
    on this platform and any ``python`` (``3.11``: from 3.11.0 on, as the lock is compiled):
    their requirements, and theirs, with the extras they ask for."""
    environment = {"python_version": python, "python_full_version": f"{python}.0"}
    wanted: dict[str, set[str]] = {}
    todo: list[tuple[str, set[str]]] = [(root, set()) for root in roots]
    while todo:
        name, extras = todo.pop()
        key = canonicalize_name(name)
        if key in wanted and extras <= wanted[key]:
            continue
        wanted.setdefault(key, set()).update(extras)
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is None or any(
                marker.evaluate({**environment, "extra": e}) for e in {"", *extras}
            ):
                todo.append((requirement.name, set(requirement.extras)))
    return set(wanted) - {canonicalize_name(root) for root in roots}


def test_the_image_lock_pins_what_the_service_needs_at_the_versions_of_the_project_lock() -> None:
    image = pins(DEPLOY / "requirements.lock")
    project = pins(ROOT / "requirements.lock")
    differing = {
        name: (v, project.get(name)) for name, v in image.items() if project.get(name) != v
    }
    assert not differing, "deploy/requirements.lock and requirements.lock disagree"
    python = re.search(r"--python-version (\d+\.\d+)", (DEPLOY / "requirements.lock").read_text())
    assert python, "the lock says which Python it is for"
    needed = runtime_requirements(python[1], "domino-service", "domino-sdk")
    assert set(image) == needed, (
        f"missing from deploy/requirements.lock: {sorted(needed - set(image))}; "
        f"not needed: {sorted(set(image) - needed)}"
    )


# -- the reverse proxy (deploy/nginx/) ----------------------------------------------------------


def test_the_nginx_config_passes_nginx_t(tmp_path: Path) -> None:
    from tests.gateway.test_nginx import NGINX, configured

    if NGINX is None:
        missing("no nginx binary: install nginx (apt-get install nginx) to check its config")
    main = configured(tmp_path, 8080, "127.0.0.1:8081")
    done = subprocess.run(
        [NGINX, "-t", "-p", str(tmp_path), "-c", str(main), "-e", str(tmp_path / "error.log")],
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")


def test_nginx_sends_every_stream_the_gateway_documents_unbuffered() -> None:
    from services.gateway.openapi import openapi
    from tests.gateway.test_nginx import TEMPLATE

    text = TEMPLATE.read_text()
    locations = re.findall(r"location ~ (\^.*?\$) \{(.*?)\n    \}", text, re.S)
    (streams,) = [pattern for pattern, block in locations if "proxy_buffering off;" in block]
    assert "proxy_read_timeout 1h;" in text
    streamed, other = [], []
    for path, operations in openapi()["paths"].items():
        concrete = re.sub(r"\{(\w+)\}", r"\1-1", path.replace("{seat}", "0"))
        content = operations.get("get", {}).get("responses", {}).get("200", {}).get("content", {})
        (streamed if "application/x-ndjson" in content else other).append(concrete)
    assert streamed
    for path in streamed:
        assert re.fullmatch(streams, path), f"{path} is a stream nginx would buffer"
    for path in other:
        assert not re.fullmatch(streams, path), f"{path} is no stream"
