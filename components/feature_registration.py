"""Row 1: the AKSInfinibandSupport preview feature, and a wait until Azure says it is Registered."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure_native
import pulumi_command as command

FEATURE_NAME = "AKSInfinibandSupport"
PROVIDER_NAMESPACE = "Microsoft.ContainerService"
# Relative to the project directory, where Pulumi runs the program: an absolute path would differ
# between checkouts and show up as a diff in every other user's preview.
WAIT_SCRIPT = "scripts/wait-feature-registered.sh"


@dataclass(frozen=True)
class FeatureRegistrationArgs:
    timeout_minutes: int


class FeatureRegistration(pulumi.ComponentResource):
    """Registers AKSInfinibandSupport on the subscription and waits until it is `Registered`.

    Registration is asynchronous on Azure's side (minutes to hours); creating a pool before it
    completes puts VMs on different InfiniBand fabrics. So the node pool depends on `wait`, the
    command that polls the state and then re-registers the resource provider.

    The registration is retained on destroy: other clusters in the subscription rely on it.
    """

    registration: azure_native.features.SubscriptionFeatureRegistration
    wait: command.local.Command
    state: pulumi.Output[str]

    def __init__(self, name: str, args: FeatureRegistrationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aks-infiniband:azure:FeatureRegistration", name, None, opts)
        self.registration = azure_native.features.SubscriptionFeatureRegistration(
            f"{name}-registration",
            azure_native.features.SubscriptionFeatureRegistrationArgs(
                provider_namespace=PROVIDER_NAMESPACE,
                feature_name=FEATURE_NAME,
                properties=azure_native.features.SubscriptionFeatureRegistrationPropertiesArgs(),
            ),
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True),
        )
        self.wait = command.local.Command(
            f"{name}-wait",
            command.local.CommandArgs(
                create=f"bash {WAIT_SCRIPT}",
                environment={
                    "FEATURE_NAMESPACE": PROVIDER_NAMESPACE,
                    "FEATURE_NAME": FEATURE_NAME,
                    "TIMEOUT_SECONDS": str(args.timeout_minutes * 60),
                },
                # Re-run when the registration is replaced; the script is idempotent.
                triggers=[self.registration.id],
                # The state is the command's only stdout line; progress goes to stderr.
                logging=command.local.Logging.STDERR,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.registration],
                custom_timeouts=pulumi.CustomTimeouts(create=f"{args.timeout_minutes + 5}m"),
            ),
        )
        self.state = self.wait.stdout.apply(lambda s: (s or "").strip())
        self.register_outputs({"state": self.state})
