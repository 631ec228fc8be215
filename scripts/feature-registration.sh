#!/usr/bin/env bash
# The AKSInfinibandSupport preview feature, done with the Azure CLI (pulumi-command runs this; the
# azure-native SubscriptionFeatureRegistration resource cannot create a feature registration:
# pulumi/pulumi-azure-native#1722). Bounded; progress on stderr; the final state alone on stdout.
#
# FEATURE_MODE=register: register the feature unless it is already Registered/Registering,
#   poll until Registered, then re-register the resource provider so the feature takes effect.
# FEATURE_MODE=require-unregistered: for sizes that must NOT have the feature (ND GB200 v6): fail
#   if it is registered (or on its way); print the state otherwise. Read-only.
#
# Inputs (environment), set by components/platform/feature_registration.py: FEATURE_MODE, SUBSCRIPTION_ID (the
# subscription Pulumi deploys to; every az call names it), FEATURE_NAMESPACE, FEATURE_NAME,
# TIMEOUT_SECONDS (featureWaitTimeoutMinutes: no default here, so the value has one source). The
# script's own pace: POLL_SECONDS (default 30), AZ_ATTEMPTS (tries per az call, default 4),
# AZ_RETRY_SECONDS (pause between them, default 15).
# Exit codes: 2 no az, 3 az not logged in / cannot see the subscription, 4 timed out, 5 az kept
# failing, 6 the feature is registered where it must not be, 64 bad input.
set -euo pipefail

: "${SUBSCRIPTION_ID:?SUBSCRIPTION_ID is not set}"
: "${FEATURE_NAMESPACE:?FEATURE_NAMESPACE is not set}"
: "${FEATURE_NAME:?FEATURE_NAME is not set}"
: "${FEATURE_MODE:?FEATURE_MODE is not set}"
: "${TIMEOUT_SECONDS:?TIMEOUT_SECONDS is not set}"
mode=$FEATURE_MODE
timeout_s=$TIMEOUT_SECONDS
poll_s="${POLL_SECONDS:-30}"
attempts="${AZ_ATTEMPTS:-4}"
retry_s="${AZ_RETRY_SECONDS:-15}"
feature="${FEATURE_NAMESPACE}/${FEATURE_NAME}"
sub=(--subscription "$SUBSCRIPTION_ID")

case "$mode" in
  register | require-unregistered) ;;
  *) echo "error: FEATURE_MODE must be 'register' or 'require-unregistered', not '${mode}'." >&2; exit 64 ;;
esac

if ! command -v az >/dev/null 2>&1; then
  echo "error: the Azure CLI (az) is not on PATH; it is needed for ${feature} on subscription ${SUBSCRIPTION_ID}." >&2
  echo "Install it (https://learn.microsoft.com/cli/azure/install-azure-cli) and run 'az login'." >&2
  exit 2
fi
if ! az account show "${sub[@]}" --only-show-errors -o none; then
  echo "error: the Azure CLI is not logged in, or its login cannot see subscription ${SUBSCRIPTION_ID} (the one Pulumi deploys to); run 'az login' with an identity that has access to it." >&2
  exit 3
fi

# az_retry <az args...>: run az (stdout captured by the caller), retrying a transient failure.
az_retry() {
  local try=1
  while true; do
    if az "$@"; then
      return 0
    fi
    if [ "$try" -ge "$attempts" ]; then
      echo "error: 'az $*' failed ${attempts} times in a row (its errors are above); check the Azure CLI and run 'pulumi up' again." >&2
      exit 5
    fi
    echo "az $1 $2 failed (attempt ${try} of ${attempts}); retrying in ${retry_s}s" >&2
    try=$((try + 1))
    sleep "$retry_s"
  done
}

feature_state() {
  az_retry feature show --namespace "$FEATURE_NAMESPACE" --name "$FEATURE_NAME" "${sub[@]}" \
    --query properties.state -o tsv --only-show-errors
}

start=$(date +%s)
registered_by_us=0
while true; do
  state=$(feature_state)
  elapsed=$(($(date +%s) - start))
  echo "feature ${feature} on subscription ${SUBSCRIPTION_ID}: ${state:-<empty>} after ${elapsed}s (limit ${timeout_s}s)" >&2

  if [ "$mode" = "require-unregistered" ]; then
    case "$state" in
      Registered | Registering | Pending)
        echo "error: ND GB200 v6 needs ${FEATURE_NAME} unregistered, and it is '${state}' on subscription ${SUBSCRIPTION_ID}:" >&2
        echo "  az feature unregister --namespace ${FEATURE_NAMESPACE} --name ${FEATURE_NAME} --subscription ${SUBSCRIPTION_ID} && az provider register --namespace ${FEATURE_NAMESPACE} --subscription ${SUBSCRIPTION_ID}" >&2
        echo "Note the flag is subscription-wide: other InfiniBand clusters in this subscription rely on it." >&2
        exit 6
        ;;
      Unregistering) ;; # settling after an unregister: wait for it
      "")
        echo "error: az returned no state for ${feature}." >&2
        exit 5
        ;;
      *)
        echo "$state"
        exit 0
        ;;
    esac
  else
    case "$state" in
      Registered) break ;;
      Registering | Pending | Unregistering) ;; # in progress: wait (after Unregistering, register below)
      *)
        if [ "$registered_by_us" -eq 0 ]; then
          echo "registering ${feature} on subscription ${SUBSCRIPTION_ID} (was ${state:-<empty>})" >&2
          az_retry feature register --namespace "$FEATURE_NAMESPACE" --name "$FEATURE_NAME" "${sub[@]}" \
            --only-show-errors -o none >&2
          registered_by_us=1
        fi
        ;;
    esac
  fi

  if [ "$elapsed" -ge "$timeout_s" ]; then
    echo "error: ${FEATURE_NAME} is still '${state}' after ${timeout_s}s; check 'az feature show --namespace ${FEATURE_NAMESPACE} --name ${FEATURE_NAME} --subscription ${SUBSCRIPTION_ID}' and run 'pulumi up' again." >&2
    exit 4
  fi
  sleep "$poll_s"
done

echo "re-registering resource provider ${FEATURE_NAMESPACE} on subscription ${SUBSCRIPTION_ID} so the feature takes effect" >&2
az_retry provider register --namespace "$FEATURE_NAMESPACE" "${sub[@]}" --wait --only-show-errors >&2
echo "Registered"
