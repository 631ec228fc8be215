"""The pin table in the render (core/pins.py's own checks: tests/unit/core/test_pins.py): the plan says when a
combination is untested, and the images the stack sets itself are the public registry's."""

from __future__ import annotations

from offline import synth


def test_the_plan_says_untested(render, render_azure):
    # The Azure half: kubernetesVersion is the cluster's, and either half exports untestedVersions.
    rendering = render_azure(kubernetesVersion="1.36", allowUntestedVersions=True)
    assert rendering.outputs["untestedVersions"] == {"kubernetesVersion": "1.36"}
    plan = synth.synthesize(rendering, images=False)["plan.md"].decode()
    assert "**untested**" in plan.split("## ")[0] and "`kubernetesVersion` `1.36`" in plan
    assert "untestedVersions" not in render().outputs  # the default combination is tested


def test_the_network_operator_images_are_the_public_registrys_never_staging(dev):
    """The rendered rc.2 package names nvcr.io/nvstaging in its own defaults; the images the stack
    sets itself (the NicClusterPolicy's) are the public nvcr.io/nvidia/mellanox ones."""
    spec = dev.one("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy").inputs["spec"]
    repos = {v["repository"] for v in spec.values() if isinstance(v, dict) and "repository" in v}
    assert repos == {"nvcr.io/nvidia/mellanox"}
