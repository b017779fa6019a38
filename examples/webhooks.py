"""A webhook: your endpoint is told, signed, when a job of yours ends or waits for a person.

Usage: python examples/webhooks.py [--port PORT]

Starts raytroupe on an embedded local Ray with its HTTP app on 127.0.0.1 (its operator lets
webhooks reach 127.0.0.1, which the default policy refuses), runs a receiver on loopback that
verifies each delivery with the ``standardwebhooks`` library, makes a webhook over HTTP, runs a
job, and prints what the receiver heard and the webhook's deliveries.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from http_app import port_argument, served
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from raytroupe import runtime

HERE = Path(__file__).parent
TASK = """\
Ray Serve exposes Python code over HTTP with autoscaling replicas.
Questions:
1. What does Ray Serve do?"""


@contextmanager
def receiver(secret: queue.Queue[str]) -> Iterator[tuple[str, queue.Queue[dict[str, Any]]]]:
    """An endpoint on 127.0.0.1 that verifies each body with the webhook's secret."""
    heard: queue.Queue[dict[str, Any]] = queue.Queue()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                event = Webhook(secret.queue[0]).verify(body, dict(self.headers.items()))
            except WebhookVerificationError as exc:
                self.send_response(401)  # not signed with our secret: not from our deployment
                print(f"receiver: refused a body ({exc})")
            else:
                self.send_response(204)
                heard.put({"id": self.headers["webhook-id"], **event})
            self.end_headers()

        def log_message(self, *_: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/raytroupe", heard
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    """Start raytroupe and a receiver, make a webhook, run a job, show what was delivered."""
    port = port_argument(__doc__)
    config = runtime.SystemConfig(
        webhooks=runtime.WebhooksConfig(network=runtime.NetworkPolicy(allow=("127.0.0.1",)))
    )
    secret: queue.Queue[str] = queue.Queue()
    with (
        served("webhooks-example", port, llm=runtime.OfflineModel(latency_s=0.2),
               config=config) as (rt, url, key),
        receiver(secret) as (endpoint, heard),
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api,
    ):  # fmt: skip
        rt.put_team(runtime.Team.from_yaml(HERE / "teams" / "research.yaml").spec())
        made = api.post("/v1/webhooks", json={"url": endpoint, "description": "example"})
        made.raise_for_status()
        hook = made.json()
        secret.put(hook["secret"])
        print(f"webhook {hook['id']} -> {hook['url']}")
        print(f"  hears: {', '.join(hook['events'])}")
        print(f"  secret: {hook['secret'][:10]}... (shown once)\n")

        job = api.post("/v1/jobs", json={"team": "research", "task": TASK}).json()
        print(f"job {job['id']} submitted")
        event = heard.get(timeout=120)
        print(f"receiver: {event['type']} of {event['data']['job_id']}, signature verified")
        print(f"  {json.dumps(event['data'], sort_keys=True)}")
        deadline = time.monotonic() + 60
        while (deliveries := api.get(f"/v1/webhooks/{hook['id']}/deliveries").json())[0][
            "state"
        ] != "delivered" and time.monotonic() < deadline:
            time.sleep(0.2)  # the receiver answered before its attempt was recorded
        print("\ndeliveries:")
        for one in deliveries:
            print(f"  {one['id']}  {one['type']}  {one['state']} after {one['attempts']} "
                  f"attempt(s), HTTP {one['status_code']}")  # fmt: skip


if __name__ == "__main__":
    main()
