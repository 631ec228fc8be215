#!/usr/bin/env bash
# Wait (bounded) until a subscription preview feature is Registered, then re-register its resource
# provider so the feature takes effect. Prints progress to stderr and the final state on stdout.
# Inputs (environment): FEATURE_NAMESPACE, FEATURE_NAME, TIMEOUT_SECONDS, POLL_SECONDS (default 30).
set -euo pipefail

: "${FEATURE_NAMESPACE:?FEATURE_NAMESPACE is not set}"
: "${FEATURE_NAME:?FEATURE_NAME is not set}"
timeout_s="${TIMEOUT_SECONDS:-1800}"
poll_s="${POLL_SECONDS:-30}"

if ! command -v az >/dev/null 2>&1; then
  echo "error: the Azure CLI (az) is not on PATH; it is needed to wait for ${FEATURE_NAMESPACE}/${FEATURE_NAME}." >&2
  echo "Install it (https://learn.microsoft.com/cli/azure/install-azure-cli) and run 'az login'." >&2
  exit 2
fi
if ! az account show --only-show-errors -o none 2>/dev/null; then
  echo "error: the Azure CLI is not logged in; run 'az login' (and 'az account set -s <subscription>')." >&2
  exit 3
fi

start=$(date +%s)
while true; do
  state=$(az feature show --namespace "$FEATURE_NAMESPACE" --name "$FEATURE_NAME" \
            --query properties.state -o tsv --only-show-errors)
  elapsed=$(( $(date +%s) - start ))
  echo "feature ${FEATURE_NAMESPACE}/${FEATURE_NAME}: ${state} after ${elapsed}s (limit ${timeout_s}s)" >&2
  if [ "$state" = "Registered" ]; then
    break
  fi
  if [ "$elapsed" -ge "$timeout_s" ]; then
    echo "error: ${FEATURE_NAME} is still '${state}' after ${timeout_s}s; check 'az feature show --namespace ${FEATURE_NAMESPACE} --name ${FEATURE_NAME}' and run 'pulumi up' again." >&2
    exit 4
  fi
  sleep "$poll_s"
done

echo "re-registering resource provider ${FEATURE_NAMESPACE} so the feature takes effect" >&2
az provider register --namespace "$FEATURE_NAMESPACE" --wait --only-show-errors >&2
echo "Registered"
