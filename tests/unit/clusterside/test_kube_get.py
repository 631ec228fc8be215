"""clusterside/kube.py's get_json / get_text through the one client (clusterside/kube_api.py): what they send
(method, the API reference's path with its parameters quoted, the query with the API's names and Go's
booleans, the bearer token, the timeout asked for) and what they raise for a non-2xx answer or none, as
the collector reads them (kube.status_of, kube.error_text)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import pytest

from clusterside import kube, kube_api
from tests.fake_server import LoopbackServer

NAME = "odd name/with?chars"  # a path parameter that needs quoting
SELECTOR = "volcano.sh/job-name=j,app!=x y"
TOKEN = "t0ken"


class Recorder(LoopbackServer):
    """Answers every GET with `status` and `body`, and records (raw path, query, headers)."""

    def __init__(self, status: int = 200, body: bytes = b'{"items": []}', reason: str | None = None):
        self.sent: list[tuple[str, dict, dict]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                url = urlparse(self.path)
                fake.sent.append((url.path, parse_qs(url.query), dict(self.headers)))
                self.send_response(status, reason)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.serve(Handler, TOKEN)

    def api(self) -> kube_api.Api:
        return kube_api.Api(kube_api.from_kubeconfig_data(json.loads(self.kubeconfig()), "test"))


def _reads(api: kube_api.Api) -> list:
    """Each read the collector makes, and the path the API reference gives it (the generated methods of
    kubernetes-client: list_namespaced_pod, read_namespaced_pod_log, list_namespaced_event, list_node,
    get_namespaced_custom_object, list_cluster_custom_object)."""
    quoted = "odd%20name%2Fwith%3Fchars"
    obj = {"group": "g.io", "version": "v1", "namespace": "ns", "plural": "jobs", "name": NAME}
    return [
        (lambda: kube.get_json(api, kube.PODS, {"namespace": "ns"}, labelSelector=SELECTOR, request_timeout=30),
         "/api/v1/namespaces/ns/pods", {"labelSelector": [SELECTOR]}),
        (lambda: kube.get_text(api, kube.POD_LOG, {"namespace": "ns", "name": NAME}, container="c", limitBytes=5,
                               sinceSeconds=7, timestamps=True, request_timeout=30),
         f"/api/v1/namespaces/ns/pods/{quoted}/log",
         {"container": ["c"], "limitBytes": ["5"], "sinceSeconds": ["7"], "timestamps": ["true"]}),
        (lambda: kube.get_text(api, kube.POD_LOG, {"namespace": "ns", "name": NAME}, container=None,
                               request_timeout=30),
         f"/api/v1/namespaces/ns/pods/{quoted}/log", {}),
        (lambda: kube.get_json(api, kube.EVENTS, {"namespace": "ns"}, request_timeout=30),
         "/api/v1/namespaces/ns/events", {}),
        (lambda: kube.get_json(api, kube.NODES, labelSelector=SELECTOR, request_timeout=30),
         "/api/v1/nodes", {"labelSelector": [SELECTOR]}),
        (lambda: kube.get_json(api, kube.NAMESPACED_OBJECT, obj, request_timeout=30),
         f"/apis/g.io/v1/namespaces/ns/jobs/{quoted}", {}),
        (lambda: kube.get_json(api, kube.CLUSTER_OBJECTS, {"group": "g.io", "version": "v1", "plural": "plural"},
                               request_timeout=30),
         "/apis/g.io/v1/plural", {}),
    ]


def test_get_json_and_get_text_send_the_api_references_path_query_and_token():
    with Recorder() as server:
        reads = _reads(server.api())
        for read, _, _ in reads:
            read()
    assert [(path, query) for path, query, _ in server.sent] == [(path, query) for _, path, query in reads]
    assert all(headers["Authorization"] == f"Bearer {TOKEN}" for _, _, headers in server.sent)
    assert server.sent[0][2]["Accept"] == "application/json"


def test_the_timeout_asked_for_is_the_requests(monkeypatch):
    seen = []
    monkeypatch.setattr(kube_api.Api, "request", lambda self, method, path, **kw: seen.append(kw["timeout"]))
    api = kube_api.Api(kube_api.Credentials(server="http://127.0.0.1:1"))
    kube.get_json(api, kube.NODES, request_timeout=7)
    kube.get_text(api, kube.POD_LOG, {"namespace": "n", "name": "p"}, request_timeout=9)
    assert seen == [7, 9]


def test_the_answer_is_the_json_or_the_text_served():
    body = {"items": [{"metadata": {"name": "p"}}]}
    with Recorder(body=json.dumps(body).encode()) as server:
        read = _reads(server.api())
        assert read[0][0]() == body
        assert json.loads(read[1][0]()) == body


@pytest.mark.parametrize(("status", "reason"), [(403, "Forbidden"), (404, "Not Found"), (503, "Service Unavailable")])
def test_a_non_2xx_answer_raises_with_its_status_and_reads_as_one_line(status, reason):
    with Recorder(status=status, body=b'{"kind": "Status"}', reason=reason) as server:
        for read, _, _ in _reads(server.api())[::3]:
            with pytest.raises(kube_api.ApiError) as raised:
                read()
            assert kube.status_of(raised.value) == status
            assert kube.error_text(raised.value) == f"Kubernetes API answered {status} {reason}"


def test_no_answer_reads_as_one_line_naming_the_server():
    api = kube_api.Api(kube_api.Credentials(server="http://127.0.0.1:1"))
    with pytest.raises(kube_api.ApiError) as raised:
        kube.get_json(api, kube.NODES, request_timeout=5)
    assert kube.status_of(raised.value) is None
    text = kube.error_text(raised.value)
    assert text.startswith("GET /api/v1/nodes: no answer from http://127.0.0.1:1") and "\n" not in text
