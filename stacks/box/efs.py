"""The EFS CSI provisioner's part in a rehearsal: a PersistentVolume bound to each claim of an EFS StorageClass.

Why: docs/explanation/box.md, "The run"."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from stacks.box.cluster import Box

EFS_PROVISIONER = "efs.csi.aws.com"


def provision(box: Box, claim: Mapping[str, Any], note: Callable[[str], None]) -> None:
    """The EFS CSI provisioner's part: a PersistentVolume bound to a claim of an EFS StorageClass."""
    spec = claim["spec"]
    if spec.get("volumeName") or not spec.get("storageClassName"):
        return
    sc = (
        box.get("storageclass", spec["storageClassName"])
        if box.exists("storageclass", spec["storageClassName"])
        else None
    )
    if not sc or sc.get("provisioner") != EFS_PROVISIONER:
        return
    meta = claim["metadata"]
    # The claim's reference with its UID, and the provisioner's annotation, as the CSI external-provisioner writes
    # them (kubernetes-sigs/sig-storage-lib-external-provisioner, controller.go): a reference without the UID
    # leaves the claim Pending until the PV controller's next periodic sync (15 s), not bound on the PV's creation.
    uid = box.get("persistentvolumeclaim", meta["name"], "-n", meta["namespace"])["metadata"]["uid"]
    pv: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta['namespace']}-{meta['name']}",
            "annotations": {"pv.kubernetes.io/provisioned-by": EFS_PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": spec["accessModes"],
            "storageClassName": spec["storageClassName"],
            "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": uid,
            },
            "csi": {"driver": EFS_PROVISIONER, "volumeHandle": "fs-box::fsap-box"},
        },
    }
    box.create([pv])
    note(f"provisioned {pv['metadata']['name']} for claim {meta['name']} (EFS CSI stand-in)")
