"""A FAKE Kubernetes API server that stores objects and records every write, for the certifier's
scenarios (there is no cluster here). The collector's read-only fake, driven by scenarios on a fake
clock, is tests/unit/clusterside/test_verify_collect.py's (tests/fake_kube.py once i19b's split lands); this one keeps a
writable object store instead. It answers as the API server does for what the certifier calls:

- GET of an object or a collection (`items`, equality label selectors `a=b,c!=d,e`, equality field
  selectors), pod logs;
- PATCH: RFC 6902 JSON Patch (test/add/replace/remove; a failed `test` is 422 Invalid, as the API
  answers), RFC 7386 merge patch (null deletes), and strategic merge where the certifier uses it
  (`status.conditions` merge by `type`, the patchMergeKey of NodeCondition); each write bumps the
  object's resourceVersion;
- POST of an Event, core/v1 or events.k8s.io/v1 (metadata.generateName honoured), stored and listed,
  validated as the real API server of e2e/ answered (pkg/apis/core/validation/events.go): an Event about
  a cluster-scoped object (a Node) outside `default` (or `kube-system` with eventTime) is 422, and an
  events.k8s.io/v1 Event needs eventTime, action, reportingController, reportingInstance and a note of
  at most 1024 bytes;
- a bearer token on every request (401 without);
- Volcano's controller where the certifier sees it: a job's phases go on by reads (`phases`), and when a
  job's phase is final its pods that have not finished are deleted, as Volcano's killJob does
  (PodRetainPhaseSoft) when a policy ends the job: the launcher's TaskCompleted -> CompleteJob leaves the
  launcher (Succeeded) and deletes the workers, which run sshd until then.
Nodes, pods and ConfigMaps are given as the API's JSON; `writes` lists (method, path, body) in order.
"""

from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.fake_server import LoopbackServer

TOKEN = "fake-certifier-token"


def selected(obj: dict, selector: str | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k) != v.lstrip("="):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def field_selected(obj: dict, selector: str | None) -> bool:
    """Equality field selectors (`spec.driver=x,spec.nodeName=y`), as the API server filters the fields a
    resource declares selectable (ResourceSlice: spec.driver, spec.nodeName)."""
    for term in filter(None, (selector or "").split(",")):
        path, value = term.split("=", 1)
        found: Any = obj
        for part in path.split("."):
            found = found.get(part) if isinstance(found, dict) else None
        if str(found) != value.lstrip("="):
            return False
    return True


def merge_patch(target: Any, patch: Any, strategic: bool = False, key: str | None = None) -> Any:
    if strategic and key == "conditions" and isinstance(patch, list) and isinstance(target, list):
        out = [copy.deepcopy(c) for c in target]
        for cond in patch:
            mine = next((c for c in out if c.get("type") == cond.get("type")), None)
            if mine is None:
                out.append(copy.deepcopy(cond))
            else:
                mine.update(copy.deepcopy(cond))
        return out
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v, strategic, k)
    return out


class Invalid(Exception):
    pass


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def json_patch(doc: dict, ops: list[dict]) -> dict:
    doc = copy.deepcopy(doc)
    for op in ops:
        *parents, last = _pointer(op["path"])
        node = doc
        for p in parents:
            if not isinstance(node, dict) or p not in node:
                raise Invalid(f"path {op['path']} does not exist")
            node = node[p]
        if op["op"] == "test":
            if node.get(last) != op["value"]:
                raise Invalid(f"test operation failed at {op['path']}: the object has been modified")
        elif op["op"] in ("add", "replace"):
            if op["op"] == "replace" and last not in node:
                raise Invalid(f"replace of missing {op['path']}")
            node[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            if last not in node:
                raise Invalid(f"remove of missing {op['path']}")
            del node[last]
        else:
            raise Invalid(f"op {op['op']} not supported by the fake")
    return doc


FINAL_PHASES = ("Completed", "Failed", "Aborted", "Terminated")


class FakeApi(LoopbackServer):
    def __init__(self, *, nodes=(), pods=(), configmaps=(), jobs=(), logs: dict[str, str] | None = None,
                 run_job=None, slices=(), phases: dict[str, list[str]] | None = None):
        self.objects: dict[str, dict] = {}
        # job name -> the phases its successive reads serve (the last one stays): the job runs, then ends
        self.phases = {k: list(v) for k, v in (phases or {}).items()}
        self.logs = dict(logs or {})  # pod path -> log text
        # run_job(job) -> (pods, launcher log): what a created Volcano job places; it is Running at its first
        # read, then Completed
        self.run_job = run_job
        self.writes: list[tuple[str, str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self.pushed: list[tuple[str, str]] = []  # what was PUT to /metrics/job/... (the Pushgateway's API)
        self.version = 100
        # path prefix -> (code, message): writes there are refused, as RBAC (403) or AKS's rules would
        self.refuse: dict[str, tuple[int, str]] = {}
        self.lock = threading.Lock()
        for n in nodes:
            self.put(f"/api/v1/nodes/{n['metadata']['name']}", n)
        for p in pods:
            self.put(f"/api/v1/namespaces/{p['metadata']['namespace']}/pods/{p['metadata']['name']}", p)
        for c in configmaps:
            self.put(f"/api/v1/namespaces/{c['metadata']['namespace']}/configmaps/{c['metadata']['name']}", c)
        for sl in slices:  # resource.k8s.io/v1 ResourceSlices, cluster-scoped
            self.put(f"/apis/resource.k8s.io/v1/resourceslices/{sl['metadata']['name']}", sl)
        for j in jobs:
            self.put(f"/apis/batch.volcano.sh/v1alpha1/namespaces/{j['metadata']['namespace']}/jobs/"
                     f"{j['metadata']['name']}", j)
            self._volcano_step(j["metadata"]["namespace"], j["metadata"]["name"], read=False)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, code: int, body: Any) -> None:
                text = isinstance(body, str)
                data = body.encode() if text else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain" if text else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                is_json = (self.headers.get("Content-Type") or "").startswith("application/")
                body = (json.loads(raw) if is_json else raw.decode()) if raw else None
                fake.requests.append((method, url.path))
                if url.path.startswith("/metrics/job/") and method == "PUT":  # a Pushgateway's API, no token
                    fake.pushed.append((url.path, body))
                    return self._send(200, "")
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, status(401, "Unauthorized", "no or a wrong bearer token"))
                with fake.lock:
                    code, answer = fake.answer(method, url.path, query, body, self.headers.get("Content-Type"))
                self._send(code, answer)

            def do_GET(self):
                self._handle("GET")

            def do_PATCH(self):
                self._handle("PATCH")

            def do_POST(self):
                self._handle("POST")

            def do_PUT(self):
                self._handle("PUT")

            def do_DELETE(self):
                self._handle("DELETE")

        self.serve(Handler, TOKEN)

    def put(self, path: str, obj: dict) -> None:
        obj = copy.deepcopy(obj)
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[path] = obj

    def _volcano_step(self, namespace: str, name: str, *, read: bool = True) -> None:
        """A read of the job serves its next phase (`phases`); once the phase is final, its pods that have
        not finished are deleted (Volcano's killJob, PodRetainPhaseSoft)."""
        path = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs/{name}"
        job = self.objects[path]
        steps = self.phases.get(name) or []
        if steps:
            job["status"] = {"state": {"phase": steps.pop(0) if len(steps) > 1 and read else steps[0]}}
        if ((job.get("status") or {}).get("state") or {}).get("phase") not in FINAL_PHASES:
            return
        prefix = f"/api/v1/namespaces/{namespace}/pods/"
        for p, pod in list(self.objects.items()):
            if (p.startswith(prefix) and pod["metadata"].get("labels", {}).get("volcano.sh/job-name") == name
                    and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")):
                del self.objects[p]

    def answer(self, method: str, path: str, query: dict, body: Any, content_type: str | None):
        refused = next((v for k, v in self.refuse.items() if method != "GET" and path.startswith(k)), None)
        if refused:
            return refused[0], status(refused[0], "Forbidden" if refused[0] == 403 else "Invalid", refused[1])
        if method == "GET":
            parts = path.split("/")
            if path.startswith("/apis/batch.volcano.sh/") and len(parts) == 8 and path in self.objects:
                self._volcano_step(parts[5], parts[7])
            if path.endswith("/log") and path[:-4] in self.objects:
                return 200, self.logs.get(path[:-4], "")
            if path in self.objects:
                return 200, self.objects[path]
            prefix = path.rstrip("/") + "/"
            found = [o for p, o in sorted(self.objects.items()) if p.startswith(prefix) and "/" not in p[len(prefix):]]
            if path == "/api/v1/pods":  # every namespace's
                found = [o for p, o in sorted(self.objects.items()) if "/pods/" in p]
            if found or path.endswith(("/nodes", "/pods", "/events", "/configmaps", "/jobs", "/resourceslices")):
                return 200, {"kind": "List", "apiVersion": "v1", "metadata": {},
                             "items": [o for o in found if selected(o, query.get("labelSelector"))
                                       and field_selected(o, query.get("fieldSelector"))]}
            return 404, status(404, "NotFound", f"{path} not found")
        if method == "POST" and path.endswith("/events"):
            invalid = event_problem(path, body)
            if invalid:
                return 422, status(422, "Invalid", f'The Event "{(body.get("metadata") or {}).get("generateName")}" '
                                   f"is invalid: {invalid}")
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            meta["name"] = meta.get("name") or f"{meta.get('generateName', 'event-')}{len(self.writes):05d}"
            self.writes.append((method, path, body))
            self.put(f"{path}/{meta['name']}", obj)
            return 201, self.objects[f"{path}/{meta['name']}"]
        if method == "POST" and path.startswith("/apis/batch.volcano.sh/") and path.endswith("/jobs"):
            obj = copy.deepcopy(body)
            namespace = path.split("/namespaces/")[1].split("/")[0]
            obj["metadata"]["namespace"] = namespace
            self.writes.append((method, path, body))
            if self.run_job is None:
                return 500, status(500, "InternalError", "the fake runs no job here")
            pods, log = self.run_job(obj)
            obj["status"] = {"state": {"phase": "Running"}}
            self.phases[obj["metadata"]["name"]] = ["Running", "Completed"]  # placed, then ended by the launcher
            self.put(f"{path}/{obj['metadata']['name']}", obj)
            for p in pods:
                self.put(f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}", p)
                if p["metadata"]["labels"].get("volcano.sh/task-spec") == "mpimaster":
                    self.logs[f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}"] = log
            return 201, obj
        if method == "PATCH":
            target_path = path[:-len("/status")] if path.endswith("/status") else path
            if target_path not in self.objects:
                return 404, status(404, "NotFound", f"{target_path} not found")
            current = self.objects[target_path]
            try:
                if content_type == "application/json-patch+json":
                    new = json_patch(current, body)
                elif content_type == "application/merge-patch+json":
                    new = merge_patch(current, body)
                elif content_type == "application/strategic-merge-patch+json":
                    new = merge_patch(current, body, strategic=True)
                else:
                    return 415, status(415, "UnsupportedMediaType", str(content_type))
            except Invalid as exc:
                return 422, status(422, "Invalid", str(exc))
            if path.endswith("/status"):  # the status subresource changes status only
                new = {**current, "status": new.get("status")}
            else:
                new["status"] = current.get("status")
            self.writes.append((method, path, body))
            self.put(target_path, new)
            return 200, self.objects[target_path]
        if method == "DELETE":
            if path not in self.objects:
                return 404, status(404, "NotFound", f"{path} not found")
            self.writes.append((method, path, body))
            del self.objects[path]
            return 200, status(200, "Success", "deleted")
        return 405, status(405, "MethodNotAllowed", f"{method} {path}")

    # --- views for the tests ---
    def node(self, name: str) -> dict:
        return self.objects[f"/api/v1/nodes/{name}"]

    def taints(self, name: str) -> list[tuple[str, str, str]]:
        return [(t["key"], t.get("value"), t["effect"]) for t in self.node(name)["spec"].get("taints") or []]

    def condition(self, name: str, kind: str) -> dict | None:
        return next((c for c in self.node(name).get("status", {}).get("conditions") or [] if c["type"] == kind), None)

    def events(self) -> list[dict]:
        return [o for p, o in sorted(self.objects.items()) if o.get("kind") == "Event"]

    def configmap(self, namespace: str, name: str) -> dict:
        return self.objects[f"/api/v1/namespaces/{namespace}/configmaps/{name}"]


def event_problem(path: str, event: dict) -> str | None:
    """What the API server refuses in an Event (the first problem, its words), else None."""
    namespace = path.split("/namespaces/")[1].split("/")[0]
    new_api = path.startswith("/apis/events.k8s.io/v1/")
    if new_api:
        for key in ("eventTime", "action", "reportingInstance", "reportingController"):
            if not event.get(key):
                return f"{key}: Required value"
        if len(str(event.get("note") or "").encode()) > 1024:
            return 'message: Invalid value: "": can have at most 1024 characters'
    about = event.get("regarding" if new_api else "involvedObject") or {}
    allowed = ("default", "kube-system") if event.get("eventTime") else ("default",)
    if not about.get("namespace") and namespace not in allowed:
        return 'involvedObject.namespace: Invalid value: "": does not match event.namespace'
    return None


def status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message}
