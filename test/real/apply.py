#!/usr/bin/env python3
"""Server-side apply every document of YAML files to a Kubernetes API server.

    apply.py --url URL --ca CA --token-file F FILE...

Paths come from the kind (the few kinds deploy/kubernetes/ ships); exits 1
with the server's message on the first refusal.
"""
import argparse
import json
import ssl
import sys
import urllib.error
import urllib.request

import yaml

KINDS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    token = open(a.token_file).read().strip()
    ctx = ssl.create_default_context(cafile=a.ca)
    docs = []
    for f in a.files:
        with open(f) as fh:
            docs += [d for d in yaml.safe_load_all(fh) if d]
    # namespaces first, so namespaced objects find theirs
    docs.sort(key=lambda d: d["kind"] != "Namespace")
    for d in docs:
        base, plural, namespaced = KINDS[d["kind"]]
        md = d["metadata"]
        path = base + (f"/namespaces/{md['namespace']}" if namespaced else "") + f"/{plural}/{md['name']}"
        req = urllib.request.Request(a.url + path + "?fieldManager=mlplat-deploy&force=true",
                                     json.dumps(d).encode(), method="PATCH",
                                     headers={"Authorization": "Bearer " + token,
                                              "Content-Type": "application/apply-patch+yaml"})
        try:
            urllib.request.urlopen(req, context=ctx, timeout=30).read()
        except urllib.error.HTTPError as e:
            sys.exit(f"apply {d['kind']}/{md['name']}: HTTP {e.code}: {e.read().decode()[:500]}")
        print(f"applied {d['kind']}/{md['name']}")


if __name__ == "__main__":
    main()
