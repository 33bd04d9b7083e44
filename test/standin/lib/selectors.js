'use strict';
// Label and field selectors with the grammar the API server accepts:
//   k=v  k==v  k!=v  k in (a,b)  k notin (a,b)  k  !k   (comma = AND)

class SelectorError extends Error {}

function splitTerms(s) {
  const out = [];
  let depth = 0, cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) { out.push(cur); cur = ''; } else cur += ch;
  }
  if (depth !== 0) throw new SelectorError(`unable to parse requirement: unbalanced parentheses in ${JSON.stringify(s)}`);
  out.push(cur);
  return out.map((t) => t.trim()).filter((t) => t.length);
}

const KEY = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?\/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$/;
const VAL = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function checkKey(k, term) {
  if (!KEY.test(k) || k.length > 317) throw new SelectorError(`unable to parse requirement: found '${k}', expected: key in ${JSON.stringify(term)}`);
}
function checkVal(v, term) {
  if (!VAL.test(v) || v.length > 63) throw new SelectorError(`unable to parse requirement: invalid label value: "${v}" in ${JSON.stringify(term)}`);
}

function parseLabelSelector(s) {
  if (!s) return [];
  return splitTerms(s).map((term) => {
    let m;
    if ((m = term.match(/^(\S+)\s+(in|notin)\s*\((.*)\)$/))) {
      checkKey(m[1], term);
      const vals = m[3].split(',').map((v) => v.trim()).filter((v) => v.length);
      vals.forEach((v) => checkVal(v, term));
      if (!vals.length) throw new SelectorError(`unable to parse requirement: for 'in', 'notin' operators, values set can't be empty`);
      return { key: m[1], op: m[2], values: vals };
    }
    if ((m = term.match(/^([^=!\s]+)\s*(==|!=|=)\s*(\S*)$/))) {
      checkKey(m[1], term); checkVal(m[3], term);
      return { key: m[1], op: m[2] === '!=' ? '!=' : '=', values: [m[3]] };
    }
    if ((m = term.match(/^!\s*(\S+)$/))) { checkKey(m[1], term); return { key: m[1], op: '!' }; }
    if ((m = term.match(/^(\S+)$/))) { checkKey(m[1], term); return { key: m[1], op: 'exists' }; }
    throw new SelectorError(`unable to parse requirement: ${JSON.stringify(term)}`);
  });
}

function matchLabels(reqs, labels) {
  labels = labels || {};
  for (const r of reqs) {
    const has = Object.prototype.hasOwnProperty.call(labels, r.key);
    const v = labels[r.key];
    switch (r.op) {
      case '=': if (!has || v !== r.values[0]) return false; break;
      case '!=': if (has && v === r.values[0]) return false; break;
      case 'in': if (!has || !r.values.includes(v)) return false; break;
      case 'notin': if (has && r.values.includes(v)) return false; break;
      case 'exists': if (!has) return false; break;
      case '!': if (has) return false; break;
    }
  }
  return true;
}

// Field selectors: every resource supports metadata.name and metadata.namespace.
function parseFieldSelector(s, extra = []) {
  if (!s) return [];
  return splitTerms(s).map((term) => {
    const m = term.match(/^([^=!]+)(==|!=|=)(.*)$/);
    if (!m) throw new SelectorError(`invalid selector: '${s}'; can't understand '${term}'`);
    const field = m[1].trim();
    if (!['metadata.name', 'metadata.namespace', ...extra].includes(field)) {
      throw new SelectorError(`field label not supported: ${field}`);
    }
    return { field, op: m[2] === '!=' ? '!=' : '=', value: m[3].trim() };
  });
}

function matchFields(reqs, obj) {
  for (const r of reqs) {
    const v = r.field.split('.').reduce((o, k) => (o == null ? undefined : o[k]), obj) ?? '';
    if (r.op === '=' ? v !== r.value : v === r.value) return false;
  }
  return true;
}

module.exports = { SelectorError, parseLabelSelector, matchLabels, parseFieldSelector, matchFields };
