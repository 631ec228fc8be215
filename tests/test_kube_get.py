"""Canary: clusterside/kube.py's get_json / get_text send what the pinned kubernetes client's generated
methods send (method, URL with quoted path parameters and query, headers, timeout) and raise the same
exception for a non-2xx answer. The collector calls the ApiClient directly (kube.py says why); this
fails first when a client upgrade changes what a generated method does."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from clusterside import kube

NAME = "odd name/with?chars"  # a path parameter that needs quoting
SELECTOR = "volcano.sh/job-name=j,app!=x y"


def _recording_client(status: int = 200, body: bytes = b'{"items": []}'):
    """An ApiClient whose REST layer records each request and answers `status` with `body`."""
    from kubernetes import client as k
    from kubernetes.client import rest

    api = k.ApiClient()
    api.configuration.api_key = {"BearerToken": "Bearer t0ken"}
    sent: list[tuple] = []

    def request(method, url, headers=None, body=None, post_params=None, _request_timeout=None):
        sent.append((method, url, headers, body, post_params or None, _request_timeout))
        raw = SimpleNamespace(status=status, reason="Forbidden" if status == 403 else "OK", data=answer,
                              headers={"content-type": "application/json"})
        return rest.RESTResponse(raw)

    answer = body
    api.rest_client.request = request
    return api, sent


def _calls(api):
    """(generated call, the same read through get_json/get_text) for each read the collector makes."""
    from kubernetes.client.api.core_v1_api import CoreV1Api
    from kubernetes.client.api.custom_objects_api import CustomObjectsApi

    core, custom, t = CoreV1Api(api), CustomObjectsApi(api), {"_request_timeout": 30}
    obj = {"group": "g.io", "version": "v1", "namespace": "ns", "plural": "jobs", "name": NAME}
    return [
        (lambda: core.list_namespaced_pod("ns", label_selector=SELECTOR, _preload_content=False, **t),
         lambda: kube.get_json(api, kube.PODS, {"namespace": "ns"}, labelSelector=SELECTOR, request_timeout=30)),
        (lambda: core.read_namespaced_pod_log(NAME, "ns", container="c", limit_bytes=5, since_seconds=7,
                                              timestamps=True, _preload_content=False, **t),
         lambda: kube.get_text(api, kube.POD_LOG, {"namespace": "ns", "name": NAME}, container="c", limitBytes=5,
                               sinceSeconds=7, timestamps=True, request_timeout=30)),
        (lambda: core.read_namespaced_pod_log(NAME, "ns", container=None, _preload_content=False, **t),
         lambda: kube.get_text(api, kube.POD_LOG, {"namespace": "ns", "name": NAME}, container=None,
                               request_timeout=30)),
        (lambda: core.list_namespaced_event("ns", _preload_content=False, **t),
         lambda: kube.get_json(api, kube.EVENTS, {"namespace": "ns"}, request_timeout=30)),
        (lambda: core.list_node(label_selector=SELECTOR, _preload_content=False, **t),
         lambda: kube.get_json(api, kube.NODES, labelSelector=SELECTOR, request_timeout=30)),
        (lambda: custom.get_namespaced_custom_object(*obj.values(), **t),
         lambda: kube.get_json(api, kube.NAMESPACED_OBJECT, obj, request_timeout=30)),
        (lambda: custom.list_cluster_custom_object("g.io", "v1", "plural", _preload_content=False, **t),
         lambda: kube.get_json(api, kube.CLUSTER_OBJECTS, {"group": "g.io", "version": "v1", "plural": "plural"},
                               request_timeout=30)),
    ]


def test_get_json_and_get_text_send_what_the_generated_methods_send():
    api, sent = _recording_client()
    for generated, direct in _calls(api):
        generated()
        direct()
        assert sent[-1] == sent[-2], sent[-2:]
    assert len(sent) == 14
    assert sent[0][2]["authorization"] == "Bearer t0ken" and sent[0][2]["Accept"] == "application/json"
    assert "odd%20name%2Fwith%3Fchars" in sent[2][1]
    assert "labelSelector=volcano.sh/job-name%3Dj%2Capp%21%3Dx%20y" in sent[0][1]


def test_the_answer_is_returned_as_the_generated_methods_return_it():
    body = {"items": [{"metadata": {"name": "p"}}]}
    api, _ = _recording_client(body=json.dumps(body).encode())
    generated, direct = _calls(api)[0]
    assert json.loads(generated().data) == direct() == body
    generated, direct = _calls(api)[5]  # the Volcano job: the collector used to read it preloaded
    assert generated() == direct() == body


@pytest.mark.parametrize("status", [403, 404, 503])
def test_a_non_2xx_answer_raises_what_the_generated_methods_raise(status):
    api, _ = _recording_client(status=status, body=b'{"kind": "Status"}')
    for generated, direct in _calls(api)[::3]:
        with pytest.raises(Exception) as old:
            generated()
        with pytest.raises(Exception) as new:
            direct()
        assert type(new.value) is type(old.value)
        assert kube.status_of(new.value) == kube.status_of(old.value) == status
        assert kube.error_text(new.value) == kube.error_text(old.value)
