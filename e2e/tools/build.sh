#!/usr/bin/env bash
# Builds the pinned upstream programs of the real-control-plane tier from the Go module proxy, once, into
# a cache outside the work tree keyed by the pins (each wrapper module's go.mod and go.sum, this script,
# the Go version), and prints the folder that holds them. A second run with the same pins builds nothing.
#   e2e/tools/build.sh [--budget SECONDS]
# With --budget, a module whose build would start after the budget is spent is left out and named.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
budget=0
[ "${1:-}" = --budget ] && budget="$2"
# The module proxy only: a module it refuses is refused here too, never fetched from its origin instead.
GOPROXY="$(go env GOPROXY | sed -E 's/[,|]direct//g; s/^direct[,|]?//; s/^off$//')"
export GOPROXY="${GOPROXY:-https://proxy.golang.org}"
cache="${E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aks-infiniband-e2e}"
key="$( (go version; cat "$here/build.sh"; for m in kube etcd kwok pulumi volcano pulumi-cli pulumi-python-host pulumi-kubernetes; do cat "$here/$m/go.mod" "$here/$m/go.sum"; done) | sha256sum | cut -c1-16)"
out="$cache/bin-$key"
start=$SECONDS
mkdir -p "$out"
# Kubernetes' version variables, so /version tells the truth (Helm reads it for charts' kubeVersion).
k8s_version="$(cd "$here/kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
[[ "$k8s_version" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { echo "e2e-tools: no k8s.io/kubernetes version in kube/go.mod" >&2; exit 1; }
minor="$(echo "$k8s_version" | cut -d. -f2)"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
build() {  # build MODULE STAMP PACKAGE...: one `go build` for the module's main packages
  local module="$1" stamp="$out/.built-$1"; shift
  [ -f "$stamp" ] && return 0
  if [ "$budget" -gt 0 ] && [ $((SECONDS - start)) -ge "$budget" ]; then
    echo "e2e-tools: $module not built: the build budget of ${budget}s is spent" >&2; return 0
  fi
  local t=$SECONDS
  echo "e2e-tools: building $module ($*) into $out ..." >&2
  (cd "$here/$module" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/" "$@")
  echo "e2e-tools: $module built in $((SECONDS - t))s" >&2
  touch "$stamp"
}
module_dir() {  # module_dir WRAPPER MODULE: MODULE's source folder, downloaded first (go list gives no folder
  # for a module not yet in the module cache: a cold cache, where nothing was built from it yet)
  local dir
  dir="$(cd "$here/$1" && GOFLAGS=-mod=mod go mod download "$2" && go list -m -f '{{.Dir}}' "$2")"
  [ -n "$dir" ] && [ -d "$dir" ] || { echo "e2e-tools: no source folder for $2 (module $1)" >&2; return 1; }
  echo "$dir"
}
# The stack-file reader of the Pulumi CLI (pulumi/main.go: the SDK's own loaders), for the render's parity test.
build pulumi .
build etcd go.etcd.io/etcd/server/v3
[ -f "$out/server" ] && mv -f "$out/server" "$out/etcd"  # go names the binary after the path: server
build kwok sigs.k8s.io/kwok/cmd/kwok
# kwok's CRDs (Logs, ClusterLogs: pod logs served from files) and its "fast" stages (nodes Ready, pods
# Running, a Job's pods Succeeded), as kwokctl loads them, from the same module.
if [ ! -d "$out/kwok-assets" ]; then
  src="$(module_dir kwok sigs.k8s.io/kwok)"
  mkdir -p "$out/kwok-assets.tmp/crds" "$out/kwok-assets.tmp/stages"
  cp "$src"/kustomize/crd/bases/*.yaml "$out/kwok-assets.tmp/crds/"
  cp "$src"/kustomize/stage/node/fast/node-*.yaml "$src"/kustomize/stage/pod/fast/pod-*.yaml "$out/kwok-assets.tmp/stages/"
  chmod -R u+w "$out/kwok-assets.tmp" && mv "$out/kwok-assets.tmp" "$out/kwok-assets"
fi
build kube k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
# Volcano's controller manager, scheduler and webhook manager (volcano/go.mod says why at that version and
# not at the stack's pin), named as Volcano's images name them; their own version, not Kubernetes'.
vc_version="$(cd "$here/volcano" && go list -m -f '{{.Version}}' volcano.sh/volcano)"
ldflags="-s -w -X volcano.sh/volcano/pkg/version.Version=$vc_version" build volcano \
  volcano.sh/volcano/cmd/controller-manager volcano.sh/volcano/cmd/scheduler volcano.sh/volcano/cmd/webhook-manager
for p in controller-manager scheduler webhook-manager; do
  if [ -f "$out/$p" ]; then mv -f "$out/$p" "$out/vc-$p"; fi
done
# The Pulumi engine (docs/real-control-plane.md, "The Pulumi engine"): the CLI, whose version is set as
# its release build sets it (sdk/v3's version.Version), so `pulumi version` tells the truth;
cli_version="$(cd "$here/pulumi-cli" && go list -m -f '{{.Version}}' github.com/pulumi/pulumi/pkg/v3)"
ldflags="$ldflags -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$cli_version" \
  build pulumi-cli github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
# the Python language host, with the script it runs the program through, from the same module;
build pulumi-python-host github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python
if [ ! -x "$out/pulumi-language-python-exec" ]; then
  src="$(module_dir pulumi-python-host github.com/pulumi/pulumi/sdk/v3)"
  install -m 0755 "$src/python/cmd/pulumi-language-python-exec" "$out/pulumi-language-python-exec"
fi
# the Kubernetes provider: the schema files its main embeds are generated first from the module's own
# (pulumi-kubernetes/gen), and its version is the module's pseudo-version, which is what it is.
k8s_provider="$(cd "$here/pulumi-kubernetes" && go list -m -f '{{.Version}}' github.com/pulumi/pulumi-kubernetes/provider/v4)"
if [ ! -f "$out/.built-pulumi-kubernetes" ] && { [ "$budget" -eq 0 ] || [ $((SECONDS - start)) -lt "$budget" ]; }; then
  src="$(module_dir pulumi-kubernetes github.com/pulumi/pulumi-kubernetes/provider/v4)"
  (cd "$here/pulumi-kubernetes" && GOFLAGS=-mod=mod go run ./gen "${k8s_provider#v}" "$src/cmd/pulumi-resource-kubernetes" .)
fi
ldflags="$ldflags -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=${k8s_provider#v}" \
  build pulumi-kubernetes .
[ -f "$out/pulumi-kubernetes" ] && mv -f "$out/pulumi-kubernetes" "$out/pulumi-resource-kubernetes"  # the plugin's name
echo "$out"
