"""The one Kubernetes client's credentials as client-go reads them (clusterside/kube_api.py): a credential
plugin that speaks to the person (its stderr is theirs, no time limit at a terminal, a bounded wait
without one), a 401 that runs it again, a client key never left on disk, relative paths that are the
kubeconfig file's, and the fields it does not follow refused in one line."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from pathlib import Path

import pytest

from clusterside import kube_api


def plugin_script(tmp_path: Path, body: str) -> dict:
    script = tmp_path / "kubelogin"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script), "args": ["get-token"]}


def credential(token: str) -> str:
    return json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                       "status": {"token": token}})


def test_the_plugins_messages_reach_the_person_and_it_knows_whether_it_may_ask(tmp_path, capfd):
    """kubelogin's device code is printed on stderr: it must not be swallowed. KUBERNETES_EXEC_INFO says
    whether there is a terminal to answer on."""
    plugin = plugin_script(tmp_path, f"echo 'To sign in, use a web browser' >&2\necho \"$KUBERNETES_EXEC_INFO\" "
                                     f"> '{tmp_path}/info'\necho '{credential('t-1')}'\n")
    assert kube_api.exec_token(plugin, interactive=False) == "t-1"
    assert "To sign in, use a web browser" in capfd.readouterr().err
    assert json.loads((tmp_path / "info").read_text())["spec"] == {"interactive": False}


def test_without_a_terminal_a_plugin_waiting_for_a_sign_in_is_given_up_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(kube_api, "EXEC_UNATTENDED_SECONDS", 0.2)
    plugin = plugin_script(tmp_path, "exec sleep 30\n")
    with pytest.raises(kube_api.ApiError, match="gave no token within 0.2 s and there is no terminal") as err:
        kube_api.exec_token(plugin, interactive=False)
    assert "\n" not in str(err.value)


def test_a_missing_plugin_says_its_install_hint(tmp_path):
    plugin = {"command": str(tmp_path / "kubelogin"), "installHint": "install kubelogin: az aks install-cli\n"}
    with pytest.raises(kube_api.ApiError, match="did not run .*; install kubelogin: az aks install-cli$"):
        kube_api.exec_token(plugin, interactive=False)


class _RefusesFirst(http.server.BaseHTTPRequestHandler):
    """401 to the first token it sees, 200 to a later one."""

    seen: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.seen.append(self.headers.get("Authorization", ""))
        ok = len(self.seen) > 1
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"kind": "NodeList"}' if ok else b'{"reason": "Unauthorized"}')

    def log_message(self, *args):
        pass


def test_a_401_runs_the_plugin_again_once(tmp_path):
    count = tmp_path / "runs"
    plugin = plugin_script(tmp_path, f"echo run >> '{count}'\nn=$(wc -l < '{count}')\n"
                                     f"echo '{{\"status\": {{\"token\": \"t-'$n'\"}}}}'\n")
    _RefusesFirst.seen = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _RefusesFirst)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        api = kube_api.Api(kube_api.Credentials(server=f"http://127.0.0.1:{server.server_port}", exec_plugin=plugin))
        assert api.get("/api/v1/nodes") == {"kind": "NodeList"}
    finally:
        server.shutdown()
    assert _RefusesFirst.seen == ["Bearer t-1", "Bearer t-2"]


def test_a_client_key_is_read_from_a_private_folder_that_is_gone_afterwards(monkeypatch):
    seen = []

    class Context:
        def load_cert_chain(self, cert: str, key: str) -> None:
            seen.append((Path(cert).read_bytes(), Path(key).read_bytes(), oct(Path(key).stat().st_mode & 0o777), key))

    creds = kube_api.Credentials(server="https://x", cert_data=b"CERT", key_data=b"KEY")
    kube_api._load_client_cert(Context(), creds)  # type: ignore[arg-type]
    ((cert, key, mode, path),) = seen
    assert (cert, key, mode) == (b"CERT", b"KEY", "0o600") and not Path(path).exists()


def kubeconfig(cluster: dict, user: dict) -> dict:
    return {"clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", **cluster}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"}


def test_data_wins_over_a_file_and_relative_paths_are_the_kubeconfigs(tmp_path):
    folder = tmp_path / "kube"
    folder.mkdir()
    path = folder / "config"
    path.write_text(json.dumps(kubeconfig({"certificate-authority": "ca.crt", "certificate-authority-data": "Q0E="},
                                          {"client-certificate": "certs/me.crt", "client-key": "/abs/me.key",
                                           "exec": {"command": "./bin/kubelogin"}})))
    creds = kube_api.from_kubeconfig(str(path), allow_exec=True)
    assert creds.ca_data == b"CA" and creds.ca_file == str(folder / "ca.crt")
    assert creds.cert_file == str(folder / "certs" / "me.crt") and creds.key_file == "/abs/me.key"
    assert creds.exec_plugin["command"] == str(folder / "bin" / "kubelogin")


@pytest.mark.parametrize("key", ["proxy-url", "tls-server-name"])
def test_a_field_it_does_not_follow_is_refused_in_one_line(key):
    with pytest.raises(kube_api.ApiError, match=f"the cluster's {key} .* is not supported here; ") as err:
        kube_api.from_kubeconfig_data(kubeconfig({key: "http://proxy:3128"}, {"token": "t"}), "--kubeconfig k")
    assert "\n" not in str(err.value)


def test_the_ca_is_loaded_from_memory_and_a_bad_one_is_refused(tmp_path):
    """No CA file is written: the context takes the PEM itself (ssl's cadata)."""
    import shutil
    import subprocess

    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed: no certificate to load")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=ca",
                    "-keyout", str(tmp_path / "ca.key"), "-out", str(tmp_path / "ca.crt")], check=True,
                   capture_output=True)
    api = kube_api.Api(kube_api.Credentials(server="https://x", ca_data=(tmp_path / "ca.crt").read_bytes()))
    assert api._ssl is not None and api._ssl.cert_store_stats()["x509_ca"] == 1
    with pytest.raises(ssl.SSLError):
        kube_api.Api(kube_api.Credentials(server="https://x", ca_data=b"-----BEGIN CERTIFICATE-----\nAAAA\n"
                                                                      b"-----END CERTIFICATE-----\n"))


def test_a_context_is_picked_as_kubectls_context_flag_picks_it(tmp_path, monkeypatch):
    """existingCluster.context (stack/existing_cluster.py): the named context's cluster and user, not the
    current one; a context the kubeconfig lacks is one line naming the ones it has."""
    doc = {"current-context": "a",
           "clusters": [{"name": "ca", "cluster": {"server": "https://a.example:443"}},
                        {"name": "cb", "cluster": {"server": "https://b.example:443"}}],
           "users": [{"name": "u", "user": {"token": "t"}}],
           "contexts": [{"name": "a", "context": {"cluster": "ca", "user": "u"}},
                        {"name": "b", "context": {"cluster": "cb", "user": "u"}}]}
    path = tmp_path / "config"
    path.write_text(json.dumps(doc))
    assert kube_api.from_kubeconfig(str(path)).server == "https://a.example:443"
    assert kube_api.from_kubeconfig(str(path), context="b").server == "https://b.example:443"
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert kube_api.default_kubeconfig(context="b").server == "https://b.example:443"
    with pytest.raises(kube_api.ApiError, match="no context 'c' \\(it has a, b\\)"):
        kube_api.from_kubeconfig(str(path), context="c")
