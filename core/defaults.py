"""Defaults that more than one layer states: the configuration's schema (stack_config/schema.py, which
documents them) and a component's Args (components/), which a test or a program builds without the
configuration. One value each, so the two cannot drift apart.

Pinned versions are not here: they are the pin table's (core/pins.py), which Renovate bumps. Nor are
the defaults of the closed sets (the certifier's mode, the gate's level): each stands beside its set
in core/choices.py, which the certifier's pods import. This module imports the pin table, so the pods
never import it, and a pin bump leaves the certifier's code hash alone (clusterside/certify.py `code_files`).
"""

from __future__ import annotations

from core import pins

# certifier.image: the pin table's pythonImage (python:3.12-slim by its index digest, Renovate-tracked), as
# the topology labeler's labelling step uses it. The certifier needs Python 3.11+ (datetime.UTC) and nothing
# else: its code is mounted (components/fabric/certifier.py).
CERTIFIER_IMAGE = pins.component("pythonImage").version
# certifier.schedule: every 6 hours, off the hour (a cron schedule, UTC).
CERTIFIER_SCHEDULE = "17 */6 * * *"

# fabricTest.doctorMinutes: the fabric doctor's time budget, added to the job's deadline unless the
# doctor is never; the job hands it to the launcher as DOCTOR_SECONDS (components/fabric/nccl_job.py).
DOCTOR_MINUTES = 15
