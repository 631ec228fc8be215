"""Row 1: the AKSInfinibandSupport preview feature: registered and Registered before the IB pool
(or, for sizes that must not have it, checked to be absent), by one Azure CLI step."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command

from core.catalog import IbFeature

FEATURE_NAME = "AKSInfinibandSupport"
PROVIDER_NAMESPACE = "Microsoft.ContainerService"
# Relative to the project directory, where Pulumi runs the program: an absolute path would differ
# between checkouts and show up as a diff in every other user's preview.
SCRIPT = "scripts/feature-registration.sh"
MODE_REGISTER = "register"
MODE_REQUIRE_UNREGISTERED = "require-unregistered"
# The script's FEATURE_MODE and the step's name for each state the size needs (names are URNs: fixed).
MODES = {IbFeature.REGISTERED: MODE_REGISTER, IbFeature.MUST_BE_ABSENT: MODE_REQUIRE_UNREGISTERED}
STEP_NAMES = {IbFeature.REGISTERED: "register", IbFeature.MUST_BE_ABSENT: "check-unregistered"}


@dataclass(frozen=True)
class FeatureRegistrationArgs:
    subscription_id: pulumi.Input[str]  # the subscription Pulumi deploys to (getClientConfig)
    timeout_minutes: int
    # What the size needs (catalog `Sku.ib_feature`). MUST_BE_ABSENT (e.g. GB200): the step only
    # checks that the feature is not registered, and fails saying how to unregister it.
    ib_feature: IbFeature = IbFeature.REGISTERED


class FeatureRegistration(pulumi.ComponentResource):
    """One `az` step for AKSInfinibandSupport on the deploying subscription; the IB pool waits on it.

    Not the azure-native `features.SubscriptionFeatureRegistration` resource: Azure answers GET on a
    feature registration with HTTP 200 whatever its state, and the provider's pre-create existence
    check refuses any 200 ("cannot create already existing resource"), so that resource fails on
    every subscription (pulumi/pulumi-azure-native#1722). The script instead registers only when
    the feature is not Registered/Registering, waits (bounded) until Registered, then re-registers
    the resource provider. Registration is asynchronous on Azure's side (minutes to hours); creating
    a pool before it completes puts VMs on different InfiniBand fabrics.

    No delete command, and `retain_on_delete`: destroy leaves the registration in place, since
    other clusters in the subscription rely on it.
    """

    step: command.local.Command
    state: pulumi.Output[str]

    def __init__(self, name: str, args: FeatureRegistrationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:azure:FeatureRegistration", name, None, opts)
        mode = MODES[args.ib_feature]
        timeout = f"{args.timeout_minutes + 5}m"  # Pulumi's timeout must not cut the script's bound short
        self.step = command.local.Command(
            f"{name}-{STEP_NAMES[args.ib_feature]}",
            command.local.CommandArgs(
                create=f"bash {SCRIPT}",
                environment={
                    "FEATURE_MODE": mode,
                    "SUBSCRIPTION_ID": args.subscription_id,
                    "FEATURE_NAMESPACE": PROVIDER_NAMESPACE,
                    "FEATURE_NAME": FEATURE_NAME,
                    "TIMEOUT_SECONDS": str(args.timeout_minutes * 60),
                },
                # Stable: re-run (the script is idempotent) only for another feature, subscription or
                # mode - never on a timestamp, so a second `pulumi up` has nothing to do.
                triggers=[f"{PROVIDER_NAMESPACE}/{FEATURE_NAME}", args.subscription_id, mode],
                # The state is the command's only stdout line; progress goes to stderr.
                logging=command.local.Logging.STDERR,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                # No delete command either: the registration outlives this stack.
                retain_on_delete=True,
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
            ),
        )
        self.state = self.step.stdout.apply(lambda s: (s or "").strip())
        self.register_outputs({"state": self.state})
