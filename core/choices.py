"""The closed sets of values that the configuration validates and the layers above act on, each once:
the certifier's mode, the fabric doctor's mode and the gate's levels. Names only: what each one does is
the code that acts on it (clusterside/certify.py, verify/doctor.py with the launcher, verify/gate.py),
so the configuration (stack_config/) checks a value without importing the judge or the cluster side.
Beside them, the one number the configuration and the certifier's pods both default (the pods import this
module, never core/defaults.py with the pin table): the scale-to-zero peer wait.
"""

from __future__ import annotations

# certifier.mode and `python -m verify certify --mode`: `taint` holds and quarantines with taints; `label`:
# condition, label and Events, no taint; `off`: judge and print only (clusterside.certify.Policy).
CERTIFIER_MODES = ("taint", "label", "off")
DEFAULT_CERTIFIER_MODE = "taint"
# fabricTest.doctor: when the launcher runs the fabric doctor; `auto` only when the all-nodes run is not PASS.
DOCTOR_MODES = ("auto", "always", "never")
# fabricTest.failOn and --fail-on: the gate's level -> the least severe verdict that trips it (verify.gate
# compares by verify.verdict.Verdict's severity).
GATE_LEVELS = {"fail": "FAIL", "warn": "WARN"}
DEFAULT_GATE_LEVEL = "fail"
# certifier.peerWaitMinutes and `certify --admit --peer-wait-minutes`: how long a held node with no peer to be
# tested with waits before it is reported (clusterside/certify_admit.py). The cluster autoscaler's
# --max-node-startup-time default (kubernetes/autoscaler@eee7143 cluster-autoscaler/config/flags/flags.go: 15m,
# "from the moment the node is registered to the time the node is ready"): past it the autoscaler no longer
# counts a node under a startup taint as starting.
DEFAULT_PEER_WAIT_MINUTES = 15
