"""docker-compose.yml, read as Compose reads it."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_every_long_lived_compose_service_is_restarted_when_it_exits():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    long_lived = {name for name, service in services.items() if service.get("restart") != "no"}
    assert long_lived == {"postgres", "redis", "web", "worker"}  # migrate runs once
    for name in long_lived:
        assert services[name].get("restart") in {"always", "unless-stopped"}, f"{name} has no restart policy"
