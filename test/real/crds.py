#!/usr/bin/env python3
"""Print the CustomResourceDefinitions of the real-peers suite as JSON (a List).

Each CRD carries, unchanged, the openAPIV3Schema of the real project's CRD
(test/schemas/, see SOURCES.md there), so the real API server validates,
defaults and prunes InferenceServices and Workflows exactly as on a cluster.
The envelope (names, scope, subresources) follows the same upstream files:
KServe serves status as a subresource, Argo Workflows does not.
"""
import json
import os
import sys

SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "schemas")

CRDS = [
    dict(file="kserve-inferenceservice-v1beta1.json", group="serving.kserve.io", version="v1beta1",
         plural="inferenceservices", singular="inferenceservice", kind="InferenceService",
         listKind="InferenceServiceList", shortNames=["isvc"], status=True),
    dict(file="argo-workflow-v1alpha1.json", group="argoproj.io", version="v1alpha1",
         plural="workflows", singular="workflow", kind="Workflow", listKind="WorkflowList",
         shortNames=["wf"], status=False),
]


def crd(c):
    path = os.path.join(SCHEMAS, c["file"])
    if not os.path.isfile(path):
        sys.exit(f"crds.py: {path} is missing: the real-peers suite needs the real CRD schemas "
                 "(see test/schemas/SOURCES.md)")
    with open(path) as f:
        schema = json.load(f)
    version = {"name": c["version"], "served": True, "storage": True,
               "schema": {"openAPIV3Schema": schema}}
    if c["status"]:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{c['plural']}.{c['group']}"},
        "spec": {"group": c["group"], "scope": "Namespaced",
                 "names": {"plural": c["plural"], "singular": c["singular"], "kind": c["kind"],
                           "listKind": c["listKind"], "shortNames": c["shortNames"]},
                 "versions": [version]},
    }


if __name__ == "__main__":
    json.dump({"apiVersion": "v1", "kind": "List", "items": [crd(c) for c in CRDS]}, sys.stdout)
