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
plugin runs as kubectl runs it (client-go plugin/pkg/client/auth/exec): its messages go to the caller's
stderr (kubelogin's device code is one), it reads the terminal where there is one (and is then given all
the time a person needs), and its token is kept until the expirationTimestamp it gave, or, when it gave
none, until the API server answers 401. Certificate data is never left on disk: the CA is loaded from
memory, a client key from a private folder removed as soon as it is read. Relative file paths are the
kubeconfig file's, as client-go resolves them.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
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
    # a kubeconfig's *-data (base64-decoded), which win over the files, as in client-go
    ca_data: bytes | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
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
# Without a terminal nobody can answer a sign-in prompt (kubelogin's devicecode waits for one): give up then.
EXEC_UNATTENDED_SECONDS = 300


def exec_token(plugin: dict, now: Callable[[], float] = time.time, interactive: bool | None = None) -> str:
    """The token a client-go exec credential plugin prints (an ExecCredential's status.token), run with the
    kubeconfig's command, args and env (client.authentication.k8s.io: the plugin's contract). Its stderr is
    the caller's; `interactive` (default: stdin is a terminal) gives it stdin and no time limit, as kubectl
    does. Kept until its status.expirationTimestamp (less a margin), or until forget_exec_token (a 401) when
    it gives none."""
    key = json.dumps(plugin, sort_keys=True)
    kept = _EXEC_TOKENS.get(key)
    if kept and now() < kept[1]:
        return kept[0]
    if interactive is None:
        interactive = sys.stdin is not None and sys.stdin.isatty()
    command = plugin.get("command")
    env = {**os.environ, **{e.get("name", ""): e.get("value", "") for e in plugin.get("env") or []},
           "KUBERNETES_EXEC_INFO": json.dumps({"apiVersion": plugin.get("apiVersion"), "kind": "ExecCredential",
                                               "spec": {"interactive": interactive}})}
    try:
        done = subprocess.run([command, *(plugin.get("args") or [])], env=env, stdout=subprocess.PIPE,
                              stdin=None if interactive else subprocess.DEVNULL, text=True,
                              timeout=None if interactive else EXEC_UNATTENDED_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        raise ApiError(f"the credential plugin {command!r} gave no token within {EXEC_UNATTENDED_SECONDS} s "
                       "and there is no terminal to sign in from (its messages are above): run it from a "
                       "terminal, or sign in first (e.g. `az login`, then AAD_LOGIN_METHOD=azurecli for "
                       "kubelogin)") from None
    except OSError as exc:
        hint = f"; {plugin['installHint'].strip()}" if plugin.get("installHint") else ""
        raise ApiError(f"the credential plugin {command!r} did not run ({exc}){hint}") from None
    try:
        status = json.loads(done.stdout)["status"]
        token = status["token"]
    except (ValueError, KeyError, TypeError):
        raise ApiError(f"the credential plugin {command!r} gave no token (exit {done.returncode}; its messages "
                       "are above)") from None
    expires = _expiry(status.get("expirationTimestamp"))
    _EXEC_TOKENS[key] = (str(token), float("inf") if expires is None else expires - EXEC_TOKEN_MARGIN_SECONDS)
    return str(token)


def forget_exec_token(plugin: dict) -> None:
    """The API server refused the plugin's token (401): the next request runs the plugin again."""
    _EXEC_TOKENS.pop(json.dumps(plugin, sort_keys=True), None)


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


def _load_client_cert(ctx: ssl.SSLContext, creds: Credentials) -> None:
    """The client certificate and key into `ctx`; from data through a private folder that is removed as
    soon as ssl has read them (it loads only files), so a user's key is never left behind."""
    if creds.cert_data is None and creds.key_data is None:
        if creds.cert_file and creds.key_file:
            ctx.load_cert_chain(creds.cert_file, creds.key_file)
        return
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for name, data, given in (("client.crt", creds.cert_data, creds.cert_file),
                                  ("client.key", creds.key_data, creds.key_file)):
            if data is None:
                paths.append(given)
                continue
            path = Path(folder) / name
            path.touch(mode=0o600)
            path.write_bytes(data)
            paths.append(str(path))
        if all(paths):
            ctx.load_cert_chain(paths[0], paths[1])


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


def from_kubeconfig(path: str, allow_exec: bool = False, context: str | None = None) -> Credentials:
    return from_kubeconfig_data(_resolved(_load(path), Path(path).parent), f"--kubeconfig {path}", allow_exec,
                                context)


# A kubeconfig's file references, which client-go resolves against the folder of the file they are in
# (clientcmd.ResolveLocalPaths): (section, entry key, fields).
_FILE_FIELDS = (("clusters", "cluster", ("certificate-authority",)),
                ("users", "user", ("client-certificate", "client-key", "tokenFile")))


def _resolved(doc: Any, base: Path) -> Any:
    """`doc` with its relative file paths (and an exec command given by a relative path with a slash)
    made the kubeconfig file's, as client-go resolves them; anything else as it was."""
    if not isinstance(doc, dict):
        return doc
    doc = json.loads(json.dumps(doc, default=str))
    for section, key, fields in _FILE_FIELDS:
        entries = doc.get(section)
        for entry in entries if isinstance(entries, list) else []:  # another shape: refused by _credentials
            inner = entry.get(key) if isinstance(entry, dict) else None
            if not isinstance(inner, dict):
                continue
            for field in fields:
                if isinstance(inner.get(field), str) and inner[field] and not Path(inner[field]).is_absolute():
                    inner[field] = str(base / inner[field])
            command = (inner.get("exec") or {}).get("command") if isinstance(inner.get("exec"), dict) else None
            if isinstance(command, str) and "/" in command and not Path(command).is_absolute():
                inner["exec"]["command"] = str(base / command)
    return doc


def from_kubeconfig_data(doc: Any, where: str, allow_exec: bool = False, context: str | None = None) -> Credentials:
    """The credentials of a kubeconfig already read (`where` names it in an error: a file, az's output, a
    variable), of its current context or of `context`, as kubectl's --context picks one."""
    if context is not None and isinstance(doc, dict):
        names = [e.get("name") for e in doc.get("contexts") or [] if isinstance(e, dict)]
        if context not in names:
            raise ApiError(f"{where}: no context {context!r} (it has {', '.join(map(str, names)) or 'none'})")
        doc = {**doc, "current-context": context}
    try:
        return _credentials(where, doc, allow_exec)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:  # a mapping of the wrong shape, bad base64
        raise ApiError(f"{where}: not a kubeconfig ({exc.__class__.__name__}: {exc})") from None


def default_kubeconfig(home: Path | None = None, context: str | None = None) -> Credentials:
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
        doc = _resolved(_load(path, path), Path(path).parent)
        if not isinstance(doc, dict):
            raise ApiError(f"{path}: not a kubeconfig (expected a YAML mapping)")
        if not merged.get("current-context") and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
        for key in ("clusters", "users", "contexts"):
            have = {e.get("name") for e in merged.setdefault(key, []) if isinstance(e, dict)}
            merged[key] += [e for e in doc.get(key) or [] if isinstance(e, dict) and e.get("name") not in have]
    return from_kubeconfig_data(merged, found[0] if len(found) == 1 else "$KUBECONFIG", allow_exec=True,
                                context=context)


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
    for key in UNSUPPORTED_CLUSTER_KEYS:
        if cluster.get(key):
            raise ApiError(f"{where}: the cluster's {key} ({cluster[key]!r}) is not supported here; "
                           f"{UNSUPPORTED_CLUSTER_KEYS[key]}")
    decoded = lambda entry, key: base64.b64decode(entry[key]) if entry.get(key) else None  # noqa: E731
    token_file = Path(user["tokenFile"]) if user.get("tokenFile") else None
    return Credentials(server=str(cluster["server"]).rstrip("/"), token=user.get("token"), token_file=token_file,
                       ca_file=cluster.get("certificate-authority"), cert_file=user.get("client-certificate"),
                       key_file=user.get("client-key"), ca_data=decoded(cluster, "certificate-authority-data"),
                       cert_data=decoded(user, "client-certificate-data"), key_data=decoded(user, "client-key-data"),
                       insecure=bool(cluster.get("insecure-skip-tls-verify")),
                       exec_plugin=user.get("exec") if allow_exec else None)


# Kubeconfig fields client-go uses that this client does not: refused in one line rather than ignored
# (a wrong host name check, or no connection).
UNSUPPORTED_CLUSTER_KEYS = {
    "proxy-url": "set HTTPS_PROXY (and NO_PROXY) in the environment instead, which this client follows",
    "tls-server-name": "give the server by the name its certificate holds, or use kubectl for this cluster",
}


class Api:
    """GET, LIST, PATCH, POST, PUT as JSON. Paths are the API's own (`/api/v1/nodes/NAME`)."""

    def __init__(self, creds: Credentials, timeout: float = REQUEST_TIMEOUT_SECONDS):
        self.creds, self.timeout = creds, timeout
        self._ssl: ssl.SSLContext | None = None
        if creds.server.startswith("https:"):
            if creds.ca_data:
                ctx = ssl.create_default_context(cadata=creds.ca_data.decode("ascii", errors="replace"))
            else:
                ctx = ssl.create_default_context(cafile=creds.ca_file)  # None: the system's
            if creds.insecure:
                ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            _load_client_cert(ctx, creds)
            self._ssl = ctx

    def request(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
                content_type: str = "application/json", text: bool = False,
                read: Callable[[Any], Any] | None = None, timeout: float | None = None, retried: bool = False) -> Any:
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
            if exc.code == 401 and self.creds.exec_plugin is not None and not retried:
                forget_exec_token(self.creds.exec_plugin)  # client-go runs the plugin again on a 401
                return self.request(method, path, query=query, body=body, content_type=content_type, text=text,
                                    read=read, timeout=timeout, retried=True)
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
