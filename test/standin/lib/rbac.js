'use strict';
// Just enough Kubernetes RBAC for the simulated controllers to decide what a pod's
// ServiceAccount may do: RoleBindings in the namespace naming the ServiceAccount, and
// the rules of the Roles they bind (ClusterRoles are not served, so they grant nothing).
// Every namespace has a "default" ServiceAccount, as the service account controller
// makes one; it holds no permission unless something binds it.

class Rbac {
  constructor(store, res) { this.store = store; this.res = res; }

  serviceAccountExists(ns, name) {
    return name === 'default' || !!this.store.get(this.res('ServiceAccount'), ns, name);
  }

  // The ServiceAccount object, or {} for a default account nobody wrote.
  serviceAccount(ns, name) {
    const rec = this.store.get(this.res('ServiceAccount'), ns, name);
    return rec ? rec.obj : {};
  }

  // May system:serviceaccount:<ns>:<sa> do verb on group/resource in ns?
  can(ns, sa, group, resource, verb) {
    for (const rb of this.store.list(this.res('RoleBinding'), ns)) {
      const b = rb.obj;
      const subject = (b.subjects || []).some((s) => s.kind === 'ServiceAccount' && s.name === sa && (s.namespace || ns) === ns);
      if (!subject || !b.roleRef || b.roleRef.kind !== 'Role') continue;
      const role = this.store.get(this.res('Role'), ns, b.roleRef.name);
      if (!role) continue;
      for (const r of role.obj.rules || []) {
        const has = (list, v) => Array.isArray(list) && (list.includes(v) || list.includes('*'));
        if (has(r.apiGroups, group) && has(r.resources, resource) && has(r.verbs, verb)) return true;
      }
    }
    return false;
  }
}

module.exports = { Rbac };
