"""docker-compose.yml, read as Compose reads it."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_every_long_lived_compose_service_is_restarted_when_it_exits():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    long_lived = {name for name, service in services.items() if service.get("restart") != "no"}
    assert long_lived == {"postgres", "redis", "web", "worker", "proxy"}  # migrate runs once
    for name in long_lived:
        assert services[name].get("restart") in {"always", "unless-stopped"}, (
            f"{name} has no restart policy"
        )


def test_the_web_service_scales_behind_a_proxy_that_passes_websockets():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    web, proxy = compose["services"]["web"], compose["services"]["proxy"]
    assert "ports" not in web  # `--scale web=N` cannot bind one host port N times
    assert proxy["ports"] == ["8000:8000"] and "--proxy-headers" in web["command"]
    nginx = compose["configs"]["nginx"]["content"]
    assert (
        "server web:8000;" in nginx and "proxy_set_header Upgrade $$http_upgrade;" in nginx
    )  # $$: Compose's escape
    assert (
        "client_max_body_size 52m;" in nginx and "proxy_buffering on;" in nginx
    )  # slow clients are nginx's to absorb
