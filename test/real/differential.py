#!/usr/bin/env python3
"""Send one request sequence to a Kubernetes API server; print one line per
request: "<step> <status code> <Status reason>".

    differential.py --url URL --token-file F [--ca CA]

The same sequence goes to the stand-in and to the real kube-apiserver (test
real/e2e/differential.sh) and the lines must agree, so the stand-in cannot
drift from what a real server answers. Each step is a request mlplat's
reconcilers make or an error they must understand.
"""
import argparse
import json
import ssl
import urllib.error
import urllib.request

NS = "diff-seq"
ISVC = f"/apis/serving.kserve.io/v1beta1/namespaces/{NS}/inferenceservices"
RQ = f"/api/v1/namespaces/{NS}/resourcequotas"


def isvc(name, pred):
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name}, "spec": {"predictor": pred}}


MODEL = {"model": {"modelFormat": {"name": "sklearn"}, "storageUri": "s3://models/m/1"}}
STEPS = [
    ("namespace-create", "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, None),
    ("namespace-again", "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, None),
    ("namespace-bad-name", "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Bad_Name"}}, None),
    ("namespace-missing", "GET", "/api/v1/namespaces/diff-none", None, None),
    ("quota-create", "POST", RQ, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"requests.cpu": "2"}}}, None),
    ("quota-stale-put", "PUT", RQ + "/q", {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "resourceVersion": "1"}, "spec": {"hard": {"requests.cpu": "3"}}}, None),
    ("quota-apply", "PATCH", RQ + "/q?fieldManager=mlplat&force=true", {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"requests.cpu": "4"}}}, "application/apply-patch+yaml"),
    ("quota-merge-missing", "PATCH", RQ + "/nope", {"spec": {"hard": {"requests.cpu": "1"}}}, "application/merge-patch+json"),
    ("quota-delete", "DELETE", RQ + "/q", None, None),
    ("quota-delete-again", "DELETE", RQ + "/q", None, None),
    ("quota-negative", "POST", RQ, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "neg"}, "spec": {"hard": {"requests.cpu": "-1"}}}, None),
    ("limits-request-above-limit", "POST", f"/api/v1/namespaces/{NS}/limitranges", {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "1500m"}}]}}, None),
    ("limits-ok", "POST", f"/api/v1/namespaces/{NS}/limitranges", {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": {"limits": [{"type": "Container", "default": {"memory": "1Gi"}, "defaultRequest": {"memory": "512Mi"}}]}}, None),
    ("netpol-bad-type", "POST", f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies", {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "n"}, "spec": {"podSelector": {}, "policyTypes": ["Inbound"]}}, None),
    ("netpol-ok", "POST", f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies", {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "n"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}, None),
    ("isvc-create", "POST", ISVC, isvc("ok", MODEL), None),
    ("isvc-again", "POST", ISVC, isvc("ok", MODEL), None),
    ("isvc-apply", "PATCH", ISVC + "/ok?fieldManager=mlplat&force=true", isvc("ok", {**MODEL, "canaryTrafficPercent": 10}), "application/apply-patch+yaml"),
    ("isvc-no-namespace", "POST", "/apis/serving.kserve.io/v1beta1/namespaces/diff-none/inferenceservices", isvc("x", MODEL), None),
    ("isvc-missing", "GET", ISVC + "/nope", None, None),
    ("isvc-list", "GET", ISVC + "?labelSelector=app%3Dx", None, None),
    ("bad-selector", "GET", ISVC + "?labelSelector=a%3D%3D%3Db%20c", None, None),
    ("unknown-resource", "GET", f"/api/v1/namespaces/{NS}/nosuchthings", None, None),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--ca")
    a = ap.parse_args()
    token = open(a.token_file).read().strip()
    ctx = ssl.create_default_context(cafile=a.ca) if a.ca else None
    for name, method, path, body, ctype in STEPS:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": "Bearer " + token, "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = ctype or "application/json"
        req = urllib.request.Request(a.url + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
                code, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            code, text = e.code, e.read().decode()
        reason = "-"
        try:
            o = json.loads(text)
            if o.get("kind") == "Status" and code >= 400:
                reason = o.get("reason") or "-"
        except ValueError:
            reason = "not-json"
        print(f"{name} {code} {reason}")


if __name__ == "__main__":
    main()
