"""deploy/grafana and deploy/prometheus as shipped: the dashboards are what
scripts/make-dashboards.py writes, import into any Grafana (a data source variable, no
fixed uid), and the scrape config names the compose cluster's brokers. Whether every panel
returns data is tests/integration/test_dashboards_single_broker.py and
tests/cluster/test_dashboards_prometheus.py, against a real Prometheus."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_dashboards", ROOT / "scripts" / "make-dashboards.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_dashboards_are_what_the_script_writes() -> None:
    make = generator()
    shipped = {p.stem for p in GRAFANA.glob("*.json")}
    assert shipped == set(make.DASHBOARDS)
    for uid in make.DASHBOARDS:
        assert (GRAFANA / f"{uid}.json").read_text() == make.render(uid), (
            f"{uid}.json is stale: run scripts/make-dashboards.py"
        )


def test_dashboards_import_into_any_grafana() -> None:
    titles = set()
    for path in GRAFANA.glob("*.json"):
        dashboard = json.loads(path.read_text())
        titles.add(dashboard["title"])
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        ids = [panel["id"] for panel in dashboard["panels"]]
        assert len(ids) == len(set(ids))
        for panel in dashboard["panels"]:
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel["targets"], panel["title"]
            for target in panel["targets"]:
                used = set(re.findall(r"\$(\w+)", target["expr"])) - {"__rate_interval"}
                assert used <= set(variables), (panel["title"], used)
    assert len(titles) == 5


def test_the_scrape_config_names_the_compose_brokers() -> None:
    config = (ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text()
    compose = (ROOT / "docker-compose.yml").read_text()
    targets = re.findall(r'"(broker\d):(\d+)"', config)
    assert targets == [("broker1", "9404"), ("broker2", "9404"), ("broker3", "9404")]
    for broker, _ in targets:
        assert re.search(rf"^  {broker}:$", compose, re.M)
    assert "JOSEFK_METRICS_PORT=9404" in (ROOT / "Dockerfile").read_text()
    service = compose[compose.index("\n  prometheus:") :]
    assert "profiles: [monitoring]" in service.split("\n\n")[0]
    assert "job_name: josefk" in config
