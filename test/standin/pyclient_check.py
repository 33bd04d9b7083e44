#!/usr/bin/python3
"""Fidelity checks with Debian's Kubernetes Python client (python3-kubernetes) against the
stand-in. Prints `ok - ...` / `not ok - ...` lines; test.sh numbers them.

Usage: pyclient_check.py KUBECONFIG
"""
import sys
import traceback

from kubernetes import client, config
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
coord = client.CoordinationV1Api()
rbac = client.RbacAuthorizationV1Api()
custom = client.CustomObjectsApi()
NS = "py-client"
failed = 0


def check(name):
    def wrap(fn):
        global failed
        try:
            fn()
            print(f"ok - python client: {name}")
        except Exception:  # noqa: BLE001 - report every failure as a test line
            failed += 1
            print(f"not ok - python client: {name}")
            for line in traceback.format_exc().splitlines()[-6:]:
                print(f"#   {line}")
        return fn
    return wrap


def lease(name, labels):
    return client.V1Lease(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1LeaseSpec(holder_identity=f"holder-{name}", lease_duration_seconds=15),
    )


@check("create a namespace and leases; duplicate create raises 409 AlreadyExists")
def _():
    ns = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS, labels={"app.kubernetes.io/managed-by": "mlplat"})))
    assert ns.status.phase == "Active", ns.status
    for i in range(7):
        coord.create_namespaced_lease(NS, lease(f"lease-{i}", {"app.kubernetes.io/managed-by": "mlplat", "shard": str(i % 2)}))
    coord.create_namespaced_lease(NS, lease("unmanaged", {}))
    try:
        coord.create_namespaced_lease(NS, lease("lease-0", {}))
        raise AssertionError("expected 409")
    except ApiException as e:
        assert e.status == 409 and '"reason":"AlreadyExists"' in e.body, (e.status, e.body)


@check("read a Lease back with typed fields")
def _():
    l = coord.read_namespaced_lease("lease-3", NS)
    assert l.spec.holder_identity == "holder-lease-3", l.spec
    assert l.spec.lease_duration_seconds == 15
    assert l.metadata.resource_version and l.metadata.uid and l.metadata.creation_timestamp


@check("list with a label selector and limit/continue pagination")
def _():
    names, cont, pages = [], None, 0
    while True:
        kw = {"label_selector": "app.kubernetes.io/managed-by=mlplat,shard in (0,1)", "limit": 3}
        if cont:
            kw["_continue"] = cont
        page = coord.list_namespaced_lease(NS, **kw)
        names += [i.metadata.name for i in page.items]
        pages += 1
        cont = page.metadata._continue
        if not cont or pages > 10:
            break
    assert names == [f"lease-{i}" for i in range(7)], names
    assert pages == 3, pages
    odd = coord.list_namespaced_lease(NS, label_selector="shard=1")
    assert [i.metadata.name for i in odd.items] == ["lease-1", "lease-3", "lease-5"], odd.items


@check("patch a Lease (strategic merge for a built-in) and see resourceVersion move")
def _():
    before = coord.read_namespaced_lease("lease-0", NS)
    after = coord.patch_namespaced_lease("lease-0", NS, {"spec": {"holderIdentity": "mlplat-1"}})
    assert after.spec.holder_identity == "mlplat-1"
    assert int(after.metadata.resource_version) > int(before.metadata.resource_version)


@check("replace with a stale resourceVersion raises 409 Conflict")
def _():
    l = coord.read_namespaced_lease("lease-1", NS)
    l.metadata.resource_version = str(int(l.metadata.resource_version) - 1)
    try:
        coord.replace_namespaced_lease("lease-1", NS, l)
        raise AssertionError("expected 409")
    except ApiException as e:
        assert e.status == 409 and '"reason":"Conflict"' in e.body, e.body


@check("RoleBinding create, then roleRef change is 422")
def _():
    rb = client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="members"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="view"),
        subjects=[client.V1Subject(kind="User", name="ann", api_group="rbac.authorization.k8s.io")],
    )
    rbac.create_namespaced_role_binding(NS, rb)
    try:
        rbac.patch_namespaced_role_binding("members", NS, {"roleRef": {"name": "edit"}})
        raise AssertionError("expected 422")
    except ApiException as e:
        assert e.status == 422 and "cannot change roleRef" in e.body, e.body


@check("custom objects: create, list across namespaces, merge-patch, delete an InferenceService")
def _():
    body = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "iris", "labels": {"app.kubernetes.io/managed-by": "mlplat"}},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"}, "storageUri": "s3://models/iris"}}}}
    o = custom.create_namespaced_custom_object("serving.kserve.io", "v1beta1", NS, "inferenceservices", body)
    assert o["metadata"]["generation"] == 1
    all_ = custom.list_cluster_custom_object("serving.kserve.io", "v1beta1", "inferenceservices", label_selector="app.kubernetes.io/managed-by=mlplat")
    assert [i["metadata"]["name"] for i in all_["items"]] == ["iris"], all_
    p = custom.patch_namespaced_custom_object("serving.kserve.io", "v1beta1", NS, "inferenceservices", "iris",
                                              {"spec": {"predictor": {"canaryTrafficPercent": 20}}})
    assert p["spec"]["predictor"]["canaryTrafficPercent"] == 20 and p["metadata"]["generation"] == 2, p["metadata"]
    custom.delete_namespaced_custom_object("serving.kserve.io", "v1beta1", NS, "inferenceservices", "iris")
    try:
        custom.get_namespaced_custom_object("serving.kserve.io", "v1beta1", NS, "inferenceservices", "iris")
        raise AssertionError("expected 404")
    except ApiException as e:
        assert e.status == 404


@check("delete a Lease; reading it again is 404 NotFound")
def _():
    st = coord.delete_namespaced_lease("lease-6", NS)
    assert st.status == "Success", st
    try:
        coord.read_namespaced_lease("lease-6", NS)
        raise AssertionError("expected 404")
    except ApiException as e:
        assert e.status == 404 and '"reason":"NotFound"' in e.body, e.body


@check("delete the namespace: it reports Terminating")
def _():
    core.delete_namespace(NS)
    ns = core.read_namespace(NS)
    assert ns.status.phase == "Terminating", ns.status

sys.exit(1 if failed else 0)
