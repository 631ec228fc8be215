"""The one Kubernetes API client, in the standard library only (urllib, ssl, json): the certifier's, the
collector's (clusterside/collect.py) and wait-access's.

Why not the `kubernetes` package: the certifier runs in the cluster from a pinned public Python image
with this repository's code beside it (docs/fabric-certifier.md); no such image has the package, and
installing it at pod start would download code (no egress in a private cluster). The cluster side needs
a dozen REST calls, each written here as the API reference gives it.

Credentials: a kubeconfig (a bearer token, or client certificate and key data, with the cluster's CA;
an exec credential plugin such as kubelogin where the caller allows it: the collector and wait-access,
which run where a person or the stack signed in with Entra ID; the certifier refuses it with one line),
else the pod's ServiceAccount (the token and CA the kubelet mounts at SERVICE_ACCOUNT_DIR, the API server
at $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT), as client-go's rest.InClusterConfig reads them.
The token file is re-read on every request: the kubelet rotates projected tokens (about hourly). A
plugin's token is kept until the expirationTimestamp it gave, as client-go keeps it, and asked again
on every request when it gave none.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
REQUEST_TIMEOUT_SECONDS = 30
# PATCH bodies by kind (the API reference, "Patch operations"): RFC 6902 JSON Patch, whose `test` op
# makes a taint change conditional on the resourceVersion read; strategic merge, under which a node's
# `status.conditions` merge by `type` (patchMergeKey), as the node problem detector writes them.
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"


class ApiError(RuntimeError):
    """A non-2xx answer or no answer: one line with the status and the API's own message; `status` and
    `reason` (HTTP's reason phrase) as the answer gave them (None: no answer)."""

    def __init__(self, message: str, status: int | None = None, reason: str | None = None):
        super().__init__(message)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class Credentials:
    server: str
    token_file: Path | None = None
    token: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    exec_plugin: dict | None = None  # a kubeconfig user's `exec` (kubelogin): run for a token, as kubectl does

    def bearer(self) -> str | None:
        if self.token_file is not None:
            return self.token_file.read_text().strip()
        if self.exec_plugin is not None:
            return exec_token(self.exec_plugin)
        return self.token


_EXEC_TOKENS: dict[str, tuple[str, float]] = {}  # a plugin's (JSON) -> its token and when it expires
EXEC_TOKEN_MARGIN_SECONDS = 60  # asked again this long before the token expires


def exec_token(plugin: dict, now: Callable[[], float] = time.time) -> str:
    """The token a client-go exec credential plugin prints (an ExecCredential's status.token), run with the
    kubeconfig's command, args and env (client.authentication.k8s.io: the plugin's contract); kept until
    its status.expirationTimestamp (less a margin) when it gives one."""
    key = json.dumps(plugin, sort_keys=True)
    kept = _EXEC_TOKENS.get(key)
    if kept and now() < kept[1]:
        return kept[0]
    env = {**os.environ, **{e["name"]: e["value"] for e in plugin.get("env") or []},
           "KUBERNETES_EXEC_INFO": json.dumps({"apiVersion": plugin.get("apiVersion"), "kind": "ExecCredential",
                                               "spec": {"interactive": False}})}
    try:
        done = subprocess.run([plugin["command"], *(plugin.get("args") or [])], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ApiError(f"the credential plugin {plugin.get('command')!r} did not run ({exc})") from None
    try:
        status = json.loads(done.stdout)["status"]
        token = status["token"]
    except (ValueError, KeyError, TypeError):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ApiError(f"the credential plugin {plugin.get('command')!r} gave no token (exit {done.returncode}: "
                       f"{last})") from None
    expires = _expiry(status.get("expirationTimestamp"))
    if expires is not None:
        _EXEC_TOKENS[key] = (str(token), expires - EXEC_TOKEN_MARGIN_SECONDS)
    return str(token)


def _expiry(text: Any) -> float | None:
    """An ExecCredential's expirationTimestamp (RFC 3339) as epoch seconds (None: none or unreadable)."""
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def in_cluster(sa_dir: Path = SERVICE_ACCOUNT_DIR) -> Credentials:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port or not (sa_dir / "token").is_file():
        raise ApiError("no --kubeconfig and not in a pod (no KUBERNETES_SERVICE_HOST or no ServiceAccount token "
                       f"under {sa_dir}): pass --kubeconfig FILE")
    host = f"[{host}]" if ":" in host else host  # an IPv6 service address
    return Credentials(server=f"https://{host}:{port}", token_file=sa_dir / "token", ca_file=str(sa_dir / "ca.crt"))


def _data_file(data: str, suffix: str) -> str:
    """Certificate data from a kubeconfig as a private temporary file (ssl loads only files)."""
    fd, path = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(data))
    return path


def _load(path: str, where: str | None = None) -> Any:
    """A kubeconfig: JSON (valid YAML, read by the standard library), else YAML with PyYAML (the deploy
    requirements; the in-cluster certifier never reads a kubeconfig and its image has no PyYAML)."""
    where = where or f"--kubeconfig {path}"
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ApiError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ApiError(f"{where}: not a text file (a kubeconfig is YAML or JSON)") from None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import yaml
    except ImportError:
        raise ApiError(f"{where}: YAML needs PyYAML (pip install -r requirements.txt), "
                       "or pass it as JSON (kubectl config view --raw -o json)") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ApiError(f"{where}: not YAML ({exc.__class__.__name__})") from None


def from_kubeconfig(path: str, allow_exec: bool = False) -> Credentials:
    return from_kubeconfig_data(_load(path), f"--kubeconfig {path}", allow_exec)


def from_kubeconfig_data(doc: Any, where: str, allow_exec: bool = False) -> Credentials:
    """The credentials of a kubeconfig already read (`where` names it in an error: a file, az's output, a
    variable)."""
    try:
        return _credentials(where, doc, allow_exec)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:  # a mapping of the wrong shape, bad base64
        raise ApiError(f"{where}: not a kubeconfig ({exc.__class__.__name__}: {exc})") from None


def default_kubeconfig(home: Path | None = None) -> Credentials:
    """What kubectl reads without flags: the files of $KUBECONFIG (os.pathsep-separated, merged as
    client-go merges them: the first file to name a cluster, user or context, or to set current-context,
    wins; missing files are skipped), else ~/.kube/config. Exec plugins allowed (a person's kubelogin)."""
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    paths = listed or [str((home or Path.home()) / ".kube" / "config")]
    found = [p for p in paths if Path(p).is_file()]
    if not found:
        raise ApiError(f"no kubeconfig: {', '.join(paths)} not found (pass --kubeconfig, or the --aks-* flags)")
    merged: dict[str, Any] = {}
    for path in found:
        doc = _load(path, path)
        if not isinstance(doc, dict):
            raise ApiError(f"{path}: not a kubeconfig (expected a YAML mapping)")
        if not merged.get("current-context") and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
        for key in ("clusters", "users", "contexts"):
            have = {e.get("name") for e in merged.setdefault(key, []) if isinstance(e, dict)}
            merged[key] += [e for e in doc.get(key) or [] if isinstance(e, dict) and e.get("name") not in have]
    return from_kubeconfig_data(merged, found[0] if len(found) == 1 else "$KUBECONFIG", allow_exec=True)


def server_problem(server: str) -> str | None:
    """Why `server` is no API server URL urllib can open (a traceback there, not an answer), or None."""
    try:
        url = urllib.parse.urlsplit(server)
        url.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if url.scheme not in ("https", "http") or not url.hostname or any(c.isspace() for c in server):
        return "is not a URL of the form https://HOST[:PORT]"
    return None


def _credentials(where: str, doc: Any, allow_exec: bool = False) -> Credentials:
    if not isinstance(doc, dict):
        raise ApiError(f"{where}: not a kubeconfig (expected a YAML mapping)")
    by_name = lambda key: {e.get("name"): e.get(key[:-1]) or {} for e in doc.get(key) or [] if isinstance(e, dict)}  # noqa: E731
    context = by_name("contexts").get(doc.get("current-context")) or {}
    cluster = by_name("clusters").get(context.get("cluster")) or {}
    user = by_name("users").get(context.get("user")) or {}
    if not cluster.get("server"):
        raise ApiError(f"{where}: its current context names no cluster server")
    if problem := server_problem(str(cluster["server"])):
        raise ApiError(f"{where}: the cluster's server {cluster['server']!r} {problem}")
    if user.get("auth-provider") and allow_exec:
        raise ApiError(f"{where}: the user runs a legacy auth-provider ({user['auth-provider'].get('name')}); "
                       "convert it to kubelogin's exec credential plugin (`kubelogin convert-kubeconfig`)")
    if (user.get("exec") and not allow_exec) or user.get("auth-provider"):
        raise ApiError(f"{where}: the user runs a credential plugin (exec/auth-provider, e.g. kubelogin); "
                       "the certifier takes a token or a client certificate (e.g. `az aks get-credentials --admin`, "
                       "or a ServiceAccount token)")
    ca_data = cluster.get("certificate-authority-data")
    ca = cluster.get("certificate-authority") or (_data_file(ca_data, ".crt") if ca_data else None)
    cert = user.get("client-certificate") or (
        _data_file(user["client-certificate-data"], ".crt") if user.get("client-certificate-data") else None)
    key = user.get("client-key") or (
        _data_file(user["client-key-data"], ".key") if user.get("client-key-data") else None)
    token_file = Path(user["tokenFile"]) if user.get("tokenFile") else None
    return Credentials(server=str(cluster["server"]).rstrip("/"), token=user.get("token"), token_file=token_file,
                       ca_file=ca, cert_file=cert, key_file=key,
                       insecure=bool(cluster.get("insecure-skip-tls-verify")),
                       exec_plugin=user.get("exec") if allow_exec else None)


class Api:
    """GET, LIST, PATCH, POST, PUT as JSON. Paths are the API's own (`/api/v1/nodes/NAME`)."""

    def __init__(self, creds: Credentials, timeout: float = REQUEST_TIMEOUT_SECONDS):
        self.creds, self.timeout = creds, timeout
        self._ssl: ssl.SSLContext | None = None
        if creds.server.startswith("https:"):
            ctx = ssl.create_default_context(cafile=creds.ca_file) if creds.ca_file else ssl.create_default_context()
            if creds.insecure:
                ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            if creds.cert_file and creds.key_file:
                ctx.load_cert_chain(creds.cert_file, creds.key_file)
            self._ssl = ctx

    def request(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
                content_type: str = "application/json", text: bool = False,
                read: Callable[[Any], Any] | None = None, timeout: float | None = None) -> Any:
        url = self.creds.server + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "*/*" if text else "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        token = self.creds.bearer()
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout, context=self._ssl) as resp:  # noqa: S310 (the API server)
                if read is not None:  # the answer as it arrives, never whole (a pod's log: verify.logread)
                    return read(resp)
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise ApiError(f"{method} {path}: Kubernetes API answered {exc.code} {_message(exc)}".rstrip(),
                           exc.code, exc.reason) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(f"{method} {path}: no answer from {self.creds.server} ({reason})") from None
        if text:
            return raw.decode("utf-8", errors="replace")
        return json.loads(raw) if raw else None

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def text(self, path: str, **query: Any) -> str:
        return self.request("GET", path, query=query, text=True)

    def stream(self, path: str, read: Callable[[Any], Any], **query: Any) -> Any:
        """`read` of the answer's body, a binary file read as it arrives; what it returns."""
        return self.request("GET", path, query=query, text=True, read=read)

    def patch(self, path: str, body: Any, content_type: str) -> Any:
        return self.request("PATCH", path, body=body, content_type=content_type)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body=body)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path, body={"propagationPolicy": "Background"})


def _message(exc: urllib.error.HTTPError) -> str:
    """The Status object's reason and message (the API's own words), else HTTP's reason."""
    try:
        status = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        status = {}
    if not isinstance(status, dict):
        status = {}
    return ": ".join(str(x) for x in (status.get("reason") or exc.reason, status.get("message")) if x)


def connect(kubeconfig: str | None) -> Api:
    return Api(from_kubeconfig(kubeconfig) if kubeconfig else in_cluster())
