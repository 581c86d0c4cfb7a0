"""The handler of an endpoint type (docs/endpoints.md) in Flask: jobgate POSTs each attempt of a
"greeting" job here, signed with the type's secret (Standard Webhooks, verified with PyPI's
``standardwebhooks``), and the answer is the job's outcome. No worker process, no NATS.

    JOBGATE_ENDPOINT_SECRET=whsec_... PORT=9091 python examples/endpoint-python/app.py
"""

from __future__ import annotations

import json
import os
import sys

from flask import Flask, Response, request
from standardwebhooks import Webhook, WebhookVerificationError

GREETINGS = {"en": "Hello", "fr": "Bonjour", "de": "Hallo"}

app = Flask(__name__)
# Several secrets, space separated, while a rotation lasts (jobgate signs with both for 24 hours).
webhooks = [Webhook(s) for s in os.environ.get("JOBGATE_ENDPOINT_SECRET", "").split()]


def problem(status: int, detail: str) -> Response:
    body = json.dumps({"type": "about:blank", "title": "Rejected", "status": status, "detail": detail})
    return Response(body, status=status, content_type="application/problem+json")


@app.post("/jobs/greeting")
def greeting() -> Response:
    body = request.get_data()  # the exact bytes received: the signature covers them
    headers = {k.lower(): v for k, v in request.headers.items()}
    msg = None
    for wh in webhooks:
        try:
            msg = wh.verify(body, headers)  # the signature, and a timestamp within 5 minutes
            break
        except WebhookVerificationError:
            continue
    if msg is None:
        return problem(401, "the request is not signed with this endpoint's secret")
    job = msg["job"]
    params = job["params"]  # validated against types.yaml's schema, defaults applied
    word = GREETINGS.get(params["language"])
    if word is None:  # a 4xx: the job fails at once (endpoint_rejected), its owner reads the detail
        return problem(422, f"no greeting in {params['language']!r} yet")
    if params["name"].lower() == "later":  # a 5xx: jobgate tries again, not before Retry-After
        return Response(status=503, headers={"Retry-After": "5"})
    # 200: the body is the job's result, stored with the type's content type.
    return Response(f"{word}, {params['name']}! (job {job['id']}, attempt {job['attempt']})\n")


if __name__ == "__main__":
    if not webhooks:
        sys.exit("set JOBGATE_ENDPOINT_SECRET to the secret `jobgate types apply` printed")
    port = int(os.environ.get("PORT", "9091"))
    print(f"greeting endpoint listening on http://127.0.0.1:{port}/jobs/greeting", flush=True)
    app.run("127.0.0.1", port, threaded=True)
