"""A client process for the journal test: submits one permit_report and prints its job.

Environment: JOBGATE_URL, JOBGATE_TOKEN, JOURNAL (the journal file), CASE (the case id); the SDK's
test hook JOBGATE_SDK_TEST_HOOK, when set, makes it hang at a point of the submission.
"""

from __future__ import annotations

import json
import os

import jobgate

with jobgate.Client(os.environ["JOBGATE_URL"], os.environ["JOBGATE_TOKEN"], journal=os.environ["JOURNAL"]) as c:
    job = c.submit("permit_report", {"case_id": int(os.environ["CASE"]), "revision": 1, "pages": 2})
    print(json.dumps({"event": "submitted", "id": job.id, "replayed": job.replayed}), flush=True)
