'use strict';
// Validation of built-in kinds as the real kube-apiserver does it, for the
// cases the real-peers differential test (test/real/e2e/differential.sh)
// found the stand-in accepting: negative quota, a LimitRange default request
// above its default limit, unknown NetworkPolicy policyTypes.

const SUFFIX = { n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };

// A resource.Quantity's value, or null when it is not one.
function quantity(v) {
  const m = /^([+-]?[0-9.]+)(e[+-]?[0-9]+|E[+-]?[0-9]+)?(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(String(v));
  if (!m || !/^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$/.test(m[1])) return null;
  return Number(m[1]) * (m[2] ? 10 ** Number(m[2].slice(1)) : 1) * SUFFIX[m[3] || ''];
}

function resourceQuota(obj) {
  const causes = [];
  for (const [k, v] of Object.entries((obj.spec && obj.spec.hard) || {})) {
    const q = quantity(v);
    if (q !== null && q < 0) causes.push({ reason: 'FieldValueInvalid', field: `spec.hard[${k}]`, message: `Invalid value: "${v}": must be greater than or equal to 0` });
  }
  return causes;
}

function limitRange(obj) {
  const causes = [];
  ((obj.spec && obj.spec.limits) || []).forEach((l, i) => {
    for (const [k, req] of Object.entries(l.defaultRequest || {})) {
      const lim = (l.default || {})[k];
      if (lim === undefined) continue;
      const a = quantity(req), b = quantity(lim);
      if (a !== null && b !== null && a > b) causes.push({ reason: 'FieldValueInvalid', field: `spec.limits[${i}].defaultRequest[${k}]`, message: `Invalid value: "${req}": default request value must be less than or equal to default limit value` });
    }
  });
  return causes;
}

function networkPolicy(obj) {
  const causes = [];
  ((obj.spec && obj.spec.policyTypes) || []).forEach((t, i) => {
    if (t !== 'Ingress' && t !== 'Egress') causes.push({ reason: 'FieldValueNotSupported', field: `spec.policyTypes[${i}]`, message: `Unsupported value: "${t}": supported values: "Egress", "Ingress"` });
  });
  return causes;
}

function validate(kind, obj) {
  if (kind === 'ResourceQuota') return resourceQuota(obj);
  if (kind === 'LimitRange') return limitRange(obj);
  if (kind === 'NetworkPolicy') return networkPolicy(obj);
  return [];
}

module.exports = { validate, quantity };
