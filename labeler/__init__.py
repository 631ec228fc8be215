"""The node labeler: `labeler/topology.py`, the script the topology labeler DaemonSet runs on every IB node
(components/platform/topology_labeler.py ships that one file in a ConfigMap; docs/topology.md). Standard library
only and no import from this project, so the file runs alone in the pod; nothing in the project imports
it but its tests."""
