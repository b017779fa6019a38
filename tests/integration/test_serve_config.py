"""deployments/serve_config.yaml deploys the application the way `serve run` / `serve deploy` do."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml
from ray import serve
from ray._common.utils import import_attr
from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
from ray.serve.schema import ServeDeploySchema

from raytroupe.protocols import ConfigError

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

CONFIG = Path(__file__).parents[2] / "deployments" / "serve_config.yaml"


def _app_config():
    config = ServeDeploySchema.model_validate(yaml.safe_load(CONFIG.read_text()))
    (app,) = config.applications
    return app


def test_the_serve_config_builds_and_serves_the_application(api):
    app = _app_config()
    assert app.import_path == "raytroupe.deployments.app:build"
    # what Serve's controller does with import_path and args
    builder = import_attr(app.import_path)
    application = call_user_app_builder_with_args_if_necessary(builder, app.args)
    serve.run(application, name="troupe-config", route_prefix="/from-config", blocking=False)
    try:
        with httpx.Client(base_url=f"{api.url}/from-config", timeout=30) as client:
            health = client.get("/healthz")
            refused = client.get("/v1/jobs")
            document = client.get("/openapi.json")
    finally:
        serve.delete("troupe-config")

    assert health.status_code == 200
    assert document.status_code == 200
    # the config names no keys and $TROUPE_API_KEYS was not set where Ray started: fail closed
    assert refused.status_code == 401


def test_bad_args_in_a_serve_config_are_a_config_error_naming_the_field():
    builder = import_attr(_app_config().import_path)
    with pytest.raises(ConfigError) as info:
        builder({"rate_limit": "lots", "max_body_bytes": -1, "api_keys": [{"name": "x"}]})
    message = str(info.value)
    assert "rate_limit" in message
    assert "max_body_bytes" in message
    assert "api_keys.0.hash" in message
