'use strict';
// Kubernetes `Status` failure bodies with the reasons and codes the real API server uses.

class ApiError extends Error {
  constructor(code, reason, message, details, headers) {
    super(message);
    this.code = code; this.reason = reason; this.details = details; this.headers = headers || {};
  }
  body() {
    const b = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: this.message, reason: this.reason, code: this.code };
    if (this.details) b.details = this.details;
    return b;
  }
}

const det = (res, name, extra) => {
  const d = { name: name || undefined, group: res && res.group ? res.group : undefined, kind: res ? res.plural : undefined, ...extra };
  for (const k of Object.keys(d)) if (d[k] === undefined) delete d[k];
  return d;
};

const E = {
  notFound: (res, name) => new ApiError(404, 'NotFound', `${res.qualified} "${name}" not found`, det(res, name)),
  alreadyExists: (res, name) => new ApiError(409, 'AlreadyExists', `${res.qualified} "${name}" already exists`, det(res, name)),
  conflict: (res, name, why) => new ApiError(409, 'Conflict', `Operation cannot be fulfilled on ${res.qualified} "${name}": ${why || 'the object has been modified; please apply your changes to the latest version and try again'}`, det(res, name)),
  // causes: [{reason, message, field}]; kind is the Kind (e.g. RoleBinding) as the real message uses it.
  invalid: (res, name, causes) => {
    const gk = res.group ? `${res.kind}.${res.group}` : res.kind;
    const msgs = causes.map((c) => `${c.field}: ${c.message}`);
    const msg = `${gk} "${name}" is invalid: ${msgs.length === 1 ? msgs[0] : '[' + msgs.join(', ') + ']'}`;
    return new ApiError(422, 'Invalid', msg, { name, group: res.group || undefined, kind: res.kind, causes });
  },
  invalidRaw: (message, details) => new ApiError(422, 'Invalid', message, details),
  forbidden: (res, name, message) => new ApiError(403, 'Forbidden', message, det(res, name)),
  badRequest: (message) => new ApiError(400, 'BadRequest', message),
  unauthorized: () => new ApiError(401, 'Unauthorized', 'Unauthorized'),
  methodNotAllowed: () => new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'),
  unsupportedMedia: (ct) => new ApiError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`, undefined),
  expired: (msg) => new ApiError(410, 'Expired', msg || 'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.'),
  tooMany: (secs) => new ApiError(429, 'TooManyRequests', 'Too many requests, please try again later.', { retryAfterSeconds: secs }, { 'Retry-After': String(secs) }),
  internal: (msg) => new ApiError(500, 'InternalError', `Internal error occurred: ${msg}`, { causes: [{ message: msg }] }),
  unavailable: (msg) => new ApiError(503, 'ServiceUnavailable', msg || 'the server is currently unable to handle the request'),
  pathNotFound: () => new ApiError(404, 'NotFound', 'the server could not find the requested resource', { causes: [{ reason: 'UnexpectedServerResponse', message: '404 page not found' }] }),
};

module.exports = { ApiError, E };
