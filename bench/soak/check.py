#!/usr/bin/env python3
"""bench/soak/check.py OUT DURATION CLIENTS — check a soak's evidence and print its table.

Reads what bench/soak/run.sh collected in OUT: the clients' logs of the intents
whose call returned an accepted row (intents.*), their retries and refusals
(errors.*), the fault events (events), worker RSS samples (rss), the database
state (*.json dumps), the stand-in's objects, write counters and request log,
and the server log.  Prints the table, then one `ok - ...` / `not ok - ...`
line per check; the exit status is 1 if any check failed.
"""
import collections
import glob
import json
import os
import re
import statistics
import sys

OUT, DURATION, CLIENTS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# SOAK_PEERS=real: the objects are the real API server's, the faults the fault proxy's
REAL = os.environ.get('SOAK_PEERS') == 'real'
AT = 'the real API server' if REAL else 'the stand-in'


def load(name, default=None):
    path = os.path.join(OUT, name)
    if not os.path.exists(path):
        return default
    with open(path) as f:
        return json.load(f)


def items(name):
    doc = load(name, {}) or {}
    return doc.get('items', []) if isinstance(doc, dict) else doc


checks = []


def check(ok, what, detail=None):
    checks.append((bool(ok), what, detail))


# ---------------------------------------------------------------- client logs
Intent = collections.namedtuple('Intent', 'ms action key project entity rid rev status replayed tries')
intents = []
for path in sorted(glob.glob(os.path.join(OUT, 'intents.*'))):
    with open(path) as f:
        for line in f:
            intents.append(Intent(*line.rstrip('\n').split('\t')))
retries = collections.Counter()
refused = collections.Counter()
abandoned = []
lost_answers = {}   # key -> (action, request id of the answer the client threw away)
for path in sorted(glob.glob(os.path.join(OUT, 'errors.*'))):
    with open(path) as f:
        for line in f:
            parts = line.rstrip('\n').split('\t')
            if parts[1] == 'retry':
                retries[parts[4]] += 1
                if parts[4] == 'lost-answer':
                    lost_answers[parts[3]] = (parts[2], parts[5])
            elif parts[1] == 'refused':
                code = re.search(r'(?:ERROR|FATAL): +([0-9A-Z]{5})', parts[5])
                refused[(parts[2], code.group(1) if code else '?')] += 1
            elif parts[1] == 'abandoned':
                abandoned.append(parts)

# ---------------------------------------------------------------- database and stand-in state
projects = {p['name']: p for p in load('projects.json', [])}
deployments = {(d['project'], d['name']): d for d in load('deployments.json', [])}
revisions = {(r['deployment_id'], r['revision']): r for r in load('revisions.json', [])}
runs = {(r['project'], r['name']): r for r in load('runs.json', [])}
versions = {(v['project'], v['model'] + '/' + v['version']): v for v in load('versions.json', [])}
audit = load('audit.json', [])
ledger = load('ledger.json', [])
namespaces = {o['metadata']['name']: o for o in items('objects-namespaces.json')}
isvcs = {(o['metadata']['namespace'], o['metadata']['name']): o for o in items('objects-inferenceservices.json')}
workflows = {(o['metadata']['namespace'], o['metadata']['name']): o for o in items('objects-workflows.json')}
writes = load('writes.json', {}) or {}
writes = writes.get('writes', writes)
by_ns_name = {}
for kind in ('resourcequotas', 'limitranges', 'networkpolicies', 'rolebindings', 'roles', 'serviceaccounts'):
    for o in items(f'objects-{kind}.json'):
        by_ns_name[(kind, o['metadata']['namespace'], o['metadata']['name'])] = o


# The identities the projects reconciler makes in every project namespace, named by
# mlplat.runner_service_account and mlplat.predictor_service_account (run.sh reads them).
identities = (load('identities.json', []) or [{}])[0]
RUNNER, PREDICTOR = identities.get('runner'), identities.get('predictor')
# mlplat binds ClusterRole mlplat-lab-inputs to its own identity (mlplat.controller_user) in
# every project namespace, as src/reconcile/projects.c renders it: a ServiceAccount's user
# name system:serviceaccount:<ns>:<name> as that ServiceAccount, any other as a User
CONTROLLER = identities.get('controller') or ''
if CONTROLLER.startswith('system:serviceaccount:') and ':' in CONTROLLER[len('system:serviceaccount:'):]:
    LAB_INPUTS_SUBJECT = ('ServiceAccount', CONTROLLER[len('system:serviceaccount:'):].split(':', 1)[1])
else:
    LAB_INPUTS_SUBJECT = ('User', CONTROLLER)
# Argo's executor minimum, exactly as src/reconcile/projects.c renders the runner's Role
RUNNER_RULES = [{'apiGroups': ['argoproj.io'], 'resources': ['workflowtaskresults'], 'verbs': ['create', 'patch']}]


def ours(kind, ns):
    return {name: o for (k, n, name), o in by_ns_name.items() if k == kind and n == ns
            and o['metadata'].get('labels', {}).get('app.kubernetes.io/managed-by') == 'mlplat'}


def binding_of(o):
    ref, subj = o.get('roleRef') or {}, o.get('subjects') or []
    return (ref.get('kind'), ref.get('name'), tuple((x.get('kind'), x.get('name')) for x in subj))


def compare(what, have, want, out):
    for name in sorted(set(have) | set(want)):
        if name not in have:
            out.append(f'{what} {name} missing (want {want[name]})')
        elif name not in want:
            out.append(f'{what} {name} extra ({have[name]})')
        elif have[name] != want[name]:
            out.append(f'{what} {name} is {have[name]}, want {want[name]}')


def tenancy_problems(p):
    """How project p's objects at the stand-in differ from its row: quota, limits,
    network policy, one binding per (role, principal) member, the runner's
    ServiceAccount, Role and binding, the predictor's ServiceAccount, the binding of
    the lab's input Secrets to mlplat itself, nothing more."""
    row, ns, out = projects[p], 'mlp-' + p, []
    want = {'requests.nvidia.com/gpu': str(row['gpu_quota'])}
    want.update({k: row[c] for k, c in (('requests.cpu', 'cpu_quota'), ('requests.memory', 'memory_quota')) if row[c]})
    rq = by_ns_name.get(('resourcequotas', ns, 'mlplat-quota'))
    hard = (rq or {}).get('spec', {}).get('hard', {})
    if any(hard.get(k) != v for k, v in want.items()):
        out.append(f'ResourceQuota hard {hard}, project quota {want}')
    for kind, name in (('limitranges', 'mlplat-limits'), ('networkpolicies', 'mlplat-isolation')):
        if (kind, ns, name) not in by_ns_name:
            out.append(f'{kind} {name} missing')
    # As _projects_claim: a member row naming a Kubernetes system identity is never bound.
    need = {m['binding']: ('ClusterRole', 'mlplat-' + m['role'], (('User', m['principal']),))
            for m in row['members'] or [] if not m['principal'].strip().lower().startswith('system:')}
    need[RUNNER] = ('Role', RUNNER, (('ServiceAccount', RUNNER),))
    if CONTROLLER:
        need['mlplat-lab-inputs'] = ('ClusterRole', 'mlplat-lab-inputs', (LAB_INPUTS_SUBJECT,))
    compare('RoleBinding', {n: binding_of(o) for n, o in ours('rolebindings', ns).items()}, need, out)
    compare('Role', {n: o.get('rules') for n, o in ours('roles', ns).items()}, {RUNNER: RUNNER_RULES}, out)
    # neither identity mounts a token; a predictor named like the runner is the runner's
    compare('ServiceAccount', {n: o.get('automountServiceAccountToken') for n, o in ours('serviceaccounts', ns).items()},
            {RUNNER: False, PREDICTOR: False}, out)
    return out

# ---------------------------------------------------------------- intents: lost, converged
# The last intent on an entity says where it must end.  "Lost" means the
# committed effect is not there at all (no row, no revision, a state that
# contradicts the intent); "not converged" means it is there but still in
# flight; FAILED with a reason is terminal and reported, not a loss.
by_entity = collections.defaultdict(list)
for i in intents:
    by_entity[(i.project, i.entity if i.action not in ('create_project',) else '')].append(i)

lost, in_flight, converged, terminal_reason = [], [], [], []
ledger_mismatch = []


def verdict(i, state, why=''):
    {'lost': lost, 'flight': in_flight, 'ok': converged, 'terminal': terminal_reason}[state].append((i, why))


for i in intents:
    p = i.project
    if i.action == 'create_project':
        row = projects.get(p)
        if not row:
            verdict(i, 'lost', 'no project row')
        elif row['status'] == 'READY' and ('mlp-' + p) in namespaces:
            verdict(i, 'ok')
        elif row['status'] == 'READY':
            ledger_mismatch.append(f'project {p} READY but namespace mlp-{p} absent at {AT}')
            verdict(i, 'lost', 'READY without a namespace')
        elif row['status'] == 'FAILED' and row['status_reason']:
            verdict(i, 'terminal', row['status_reason'])
        else:
            verdict(i, 'flight', row['status'])
    elif i.action in ('set_project_quota', 'grant_role', 'revoke_role'):   # judged by the project's objects
        row = projects.get(p)
        if not row:
            verdict(i, 'lost', 'no project row')
        elif i.action == 'set_project_quota' and (row['cpu_quota'], row['memory_quota']) != ('6', '12Gi'):
            verdict(i, 'lost', f'quota {row["cpu_quota"]}/{row["memory_quota"]}')
        elif row['status'] == 'READY':
            why = tenancy_problems(p)
            verdict(i, 'lost' if why else 'ok', '; '.join(why))
        elif row['status'] == 'FAILED' and row['status_reason']:
            verdict(i, 'terminal', row['status_reason'])
        else:
            verdict(i, 'flight', row['status'])
    elif i.action in ('register_model_version', 'set_model_stage'):
        v = versions.get((p, i.entity))
        if not v:
            verdict(i, 'lost', 'no model version row')
        elif i.action == 'set_model_stage' and v['stage'] != 'CANDIDATE':
            verdict(i, 'lost', f'stage {v["stage"]}')
        else:
            verdict(i, 'ok')
    elif i.action in ('deploy', 'undeploy'):   # judged by the last of them on the deployment
        d = deployments.get((p, i.entity))
        if not d:
            verdict(i, 'lost', 'no deployment row')
            continue
        if i.action == 'deploy' and (d['id'], int(i.rev)) not in revisions:
            verdict(i, 'lost', f'revision {i.rev} missing')
            continue
        last = [x for x in by_entity[(p, i.entity)] if x.action in ('deploy', 'undeploy')][-1]
        obj = isvcs.get(('mlp-' + p, i.entity))
        if last.action == 'undeploy':
            if d['status'] == 'DELETED' and obj is None:
                verdict(i, 'ok')
            elif d['status'] == 'DELETED':
                ledger_mismatch.append(f'deployment {p}/{i.entity} DELETED but its InferenceService is still at {AT}')
                verdict(i, 'lost', 'DELETED, object still there')
            elif d['status'] == 'DELETING':
                verdict(i, 'flight', 'DELETING')
            else:
                verdict(i, 'lost', f'{d["status"]} after undeploy')
        else:
            want = int(last.rev)
            label = obj and obj['metadata'].get('labels', {}).get('mlplat.io/revision')
            if d['desired_revision'] != want:
                verdict(i, 'lost', f'desired revision {d["desired_revision"]}, last deploy returned {want}')
            elif d['status'] == 'READY' and d['observed_revision'] == want and label == str(want):
                verdict(i, 'ok')
            elif d['status'] == 'READY':
                ledger_mismatch.append(f'deployment {p}/{i.entity} READY at revision {d["observed_revision"]}, '
                                       f'object revision at {AT} {label}, desired {want}')
                verdict(i, 'lost', 'READY on the wrong revision')
            elif d['status'] == 'FAILED' and d['status_reason']:
                verdict(i, 'terminal', d['status_reason'])
            else:
                verdict(i, 'flight', d['status'])
    elif i.action in ('start_run', 'cancel_run'):
        r = runs.get((p, i.entity))
        if not r:
            verdict(i, 'lost', 'no run row')
            continue
        cancelled = any(x.action == 'cancel_run' for x in by_entity[(p, i.entity)])
        wf = workflows.get(('mlp-' + p, f'{i.entity}-{r["attempt"]}'))
        phase = wf and wf.get('status', {}).get('phase')
        st = r['status']
        if st == 'SUCCEEDED' and phase == 'Succeeded':
            verdict(i, 'ok')
        elif st == 'CANCELLED' and cancelled and (wf is None or phase in ('Failed', 'Error')):
            verdict(i, 'ok')
        elif st == 'FAILED' and r['status_reason']:
            verdict(i, 'terminal', r['status_reason'])
        elif st in ('SUCCEEDED', 'CANCELLED', 'FAILED'):
            ledger_mismatch.append(f'run {p}/{i.entity} {st} but the workflow is {phase or "absent"}')
            verdict(i, 'lost', f'{st} vs workflow {phase}')
        elif st == 'CANCEL_REQUESTED' or not cancelled:
            verdict(i, 'flight', st)
        else:
            verdict(i, 'lost', f'{st} after cancel')

check(intents, f'the clients committed intents ({len(intents)})')
check(not lost, f'no committed intent lost ({len(lost)})',
      [f'{i.action} {i.project}/{i.entity} key {i.key}: {w}' for i, w in lost[:10]])
check(not in_flight, f'every committed intent converged or is terminal with a reason ({len(in_flight)} still in flight)',
      [f'{i.action} {i.project}/{i.entity}: {w}' for i, w in in_flight[:10]])

# ---------------------------------------------------------------- audit: exactly one event per intent
KEYED = {'create_project': 'create_project', 'register_model_version': 'register_model', 'deploy': 'deploy',
         'start_run': 'start_run', 'set_project_quota': 'set_project_quota'}
MEMBERSHIP = ('grant_role', 'revoke_role')
audit_by_rid = collections.Counter((a['action'], a['request_id']) for a in audit)
audit_rids = {a['request_id'] for a in audit}
bad_audit = []
rids_per_key = collections.defaultdict(set)
for i in intents:
    if i.action in KEYED:
        rids_per_key[i.key].add(i.rid)
        n = audit_by_rid[(KEYED[i.action], i.rid)]
        if n != 1:
            bad_audit.append(f'{i.action} key {i.key}: {n} audit events for request {i.rid}')
# An answer thrown away (as if lost after COMMIT) and asked again: a keyed call
# must replay the very request that committed, flagged as a replay.
replays = 0
for i in intents:
    if i.key in lost_answers and i.action in KEYED:
        replays += 1
        if lost_answers[i.key][1] != i.rid or i.replayed != 't':
            bad_audit.append(f'{i.action} key {i.key}: lost answer {lost_answers[i.key][1]}, '
                             f'retry answered {i.rid} (replayed {i.replayed})')
for k, rids in rids_per_key.items():
    if len(rids) > 1:
        bad_audit.append(f'key {k} answered with {len(rids)} different request ids (a replay made a new request)')
# Unkeyed intents are state transitions: one audit event per entity, however often retried.
ids = {}
for (p, n), d in deployments.items():
    ids[('undeploy', p, n)] = d['id']
for (p, n), r in runs.items():
    ids[('cancel_run', p, n)] = r['id']
for (p, n), v in versions.items():
    ids[('set_model_stage', p, n)] = v['id']
audit_by_entity = collections.Counter((a['action'], a['project'], a['entity_id']) for a in audit)
for action, p, e in {(i.action, i.project, i.entity) for i in intents if i.action not in KEYED and i.action not in MEMBERSHIP}:
    n = audit_by_entity[(action, p, ids.get((action, p, e)))]
    if n != 1:
        bad_audit.append(f'{action} {p}/{e}: {n} audit events')
# grant_role/revoke_role audit every call, with "changed": the one that changed the
# membership, however often retried, is exactly one.
changed = collections.Counter((a['action'], a['project'], f'{a["detail"].get("principal")}/{a["detail"].get("role")}')
                              for a in audit if a['action'] in MEMBERSHIP and (a['detail'] or {}).get('changed'))
for action, p, e in {(i.action, i.project, i.entity) for i in intents if i.action in MEMBERSHIP}:
    if changed[(action, p, e)] != 1:
        bad_audit.append(f'{action} {p} {e}: {changed[(action, p, e)]} audit events that changed the membership')
# Audit events nobody asked for: an intent the client abandoned may have committed; nothing else may.
logged = {i.rid for i in intents}
stray = [a for a in audit if a['action'] in KEYED.values() and a['request_id'] not in logged]
check(not bad_audit, f'every intent has exactly one audit event ({len(bad_audit)} exceptions)', bad_audit[:10])
check(len(stray) <= len(abandoned), f'no audit event without a client intent ({len(stray)}; {len(abandoned)} intents abandoned)',
      [f'{a["action"]} {a["project"]} {a["request_id"]}' for a in stray[:10]])

# ---------------------------------------------------------------- duplicates at the stand-in
# A second create of a name is a duplicate unless a delete came between: an apply still in
# flight when its leader was stopped can land after the undeploy's delete and make the object
# again (nothing a client can prevent); mlplat must then find it, record it and delete it
# again (checked above: no InferenceService of a DELETED deployment is left).
dups = [f'{k}: {v.get("create", 0)} creates, {v.get("delete", 0)} deletes' for k, v in writes.items()
        if v.get('create', 0) > 1 + v.get('delete', 0)]
recreated = [k for k, v in writes.items() if 1 < v.get('create', 0) <= 1 + v.get('delete', 0)]
per_run = collections.Counter((o['metadata']['namespace'], o['metadata'].get('labels', {}).get('mlplat.io/run'))
                              for o in workflows.values())
dups += [f'run {ns}/{r}: {n} workflows' for (ns, r), n in per_run.items() if n > 1]
check(not dups, f'no duplicate external object ({len(dups)})', dups[:10])

# ---------------------------------------------------------------- ledger and observed state vs the stand-in
led_wf = collections.defaultdict(list)
led_isvc = collections.defaultdict(list)
led_proj = set()   # "Kind namespace/name" of every project object the ledger says was applied or adopted
for l in ledger:
    if l['kind'] == 'projects' and l['action'] in ('APPLY', 'ADOPT') and l['outcome'] == 'OK' and l['note']:
        led_proj.add(re.split(r': ', l['note'], maxsplit=1)[0])
    if l['kind'] == 'runs' and l['action'] in ('CREATE', 'ADOPT') and l['outcome'] == 'OK':
        led_wf[l['note']].append(l['action'])
    # ADOPT: a pass found the desired revision applied by a write whose answer was lost
    if l['kind'] == 'deployments' and l['action'] in ('APPLY', 'REPAIR', 'ADOPT') and l['outcome'] == 'OK':
        led_isvc[l['entity_id']].append(l['action'])
for (ns, name), o in workflows.items():
    if f'{ns}/{name}' not in led_wf:
        ledger_mismatch.append(f'workflow {ns}/{name} at {AT} has no CREATE/ADOPT in the ledger')
for note in led_wf:
    ns, _, name = note.partition('/')
    if (ns, name) not in workflows:
        ledger_mismatch.append(f'ledger says workflow {note} was created; {AT} has none')
by_ns = {'mlp-' + p: p for p in projects}
for (ns, name), o in isvcs.items():
    d = deployments.get((by_ns.get(ns), name))
    if not d:
        ledger_mismatch.append(f'InferenceService {ns}/{name} has no deployment row')
    elif d['status'] != 'DELETED' and d['id'] not in led_isvc:   # a DELETED one's object is a lost undeploy, above
        ledger_mismatch.append(f'InferenceService {ns}/{name} exists but the ledger has no APPLY for deployment {d["id"]}')
# Every object the projects reconciler made (labelled managed-by mlplat and with a
# project; the install's own namespace has none), as the ledger names it
# (src/reconcile/projects.c obj_label): an APPLY or an ADOPT of it, as for workflows and
# InferenceServices.
PROJECT_KINDS = (('namespaces', 'Namespace'), ('resourcequotas', 'ResourceQuota'), ('limitranges', 'LimitRange'),
                 ('networkpolicies', 'NetworkPolicy'), ('rolebindings', 'RoleBinding'),
                 ('serviceaccounts', 'ServiceAccount'), ('roles', 'Role'))
project_objects = 0
for r, kind in PROJECT_KINDS:
    for o in items(f'objects-{r}.json'):
        md = o['metadata']
        labels = md.get('labels', {})
        if labels.get('app.kubernetes.io/managed-by') != 'mlplat' or 'mlplat.io/project' not in labels:
            continue
        project_objects += 1
        label = f'{kind} {md["namespace"] + "/" if md.get("namespace") else ""}{md["name"]}'
        if label not in led_proj:
            ledger_mismatch.append(f'{label} at {AT} has no APPLY/ADOPT in the ledger')
tenancy_checked = 0
for p, row in projects.items():
    if row['status'] == 'READY':
        tenancy_checked += 1
        ledger_mismatch += [f'project {p} READY but {w}' for w in tenancy_problems(p)]
check(not ledger_mismatch, f'ledger and observed state agree with {AT} ({len(ledger_mismatch)} disagreements)',
      ledger_mismatch[:10])

# ---------------------------------------------------------------- faults injected, kills, restarts
rules = {r['id']: r for r in (load('fault-rules.json', {}) or {}).get('rules', [])}
latency_ids = {i for i, r in rules.items() if r.get('latencyMs')}
faults = collections.Counter()
requests = 0
try:
    with open(os.path.join(OUT, 'requests.jsonl')) as f:
        for line in f:
            e = json.loads(line)
            requests += 1
            if e.get('fault') == 'TooManyRequests':
                faults['429 + Retry-After'] += 1
            elif e.get('fault') in ('ServiceUnavailable', 'InternalError'):
                faults['5xx'] += 1
            if e.get('dropped'):
                faults['dropped after apply'] += 1
            if latency_ids & set(e.get('faults', [])):
                faults['latency spike (1.5 s)'] += 1
except FileNotFoundError:
    pass
events = collections.Counter()
leader_kills = 0
held_kills = 0   # hold_kill rounds in which a leader was terminated with its request held
with open(os.path.join(OUT, 'events')) as f:
    for line in f:
        ms, what, *rest = line.split()
        events[what] += 1
        if what == 'leader_kill':
            leader_kills += int(rest[0] or 0)
        if what == 'hold_kill' and int(rest[0] or 0) > 0:
            held_kills += 1
server_log = open(os.path.join(OUT, 'server.log'), errors='replace').read()
sig9 = len(re.findall(r'was terminated by signal 9', server_log))
other_crash = re.findall(r'.*(?:terminated by signal (?!9\b)\d+|PANIC:|TRAP:|ERROR: AddressSanitizer|runtime error:).*',
                         server_log)
check(not other_crash, 'no crash or sanitizer report in the server log other than the kill -9s the soak made',
      other_crash[:5])
check(events['kill9'] >= 2 and sig9 >= events['kill9'], f'the kill -9s happened ({events["kill9"]}; server log: {sig9})')
check(events['restart_end'] >= 2, f'the immediate restarts happened ({events["restart_end"]})')
# run.sh records SOAK_HOLD_KILL_S; a soak asked to stop leaders mid-write that never did
# (no hold rule matched, or no leader to terminate) did not test what it claims to
HOLD_KILL_S = int((open(os.path.join(OUT, 'hold_kill_s')).read().strip() if os.path.exists(os.path.join(OUT, 'hold_kill_s'))
                   else os.environ.get('SOAK_HOLD_KILL_S', '0')) or 0)
check(HOLD_KILL_S == 0 or held_kills > 0,
      f'leaders were terminated mid-write ({held_kills} of {events["hold_kill"]} holds; every {HOLD_KILL_S} s)')

# ---------------------------------------------------------------- RSS
Sample = collections.namedtuple('Sample', 't pid kind replica role rss anon')
samples = []
try:
    with open(os.path.join(OUT, 'rss')) as f:
        for line in f:
            s = line.split()
            if len(s) == 7:
                samples.append(Sample(int(s[0]), s[1], s[2], s[3], s[4], int(s[5]), int(s[6])))
except FileNotFoundError:
    pass
rss_rows, rss_bad = [], []
t0 = int(open(os.path.join(OUT, 't0')).read())
steady_t = int(open(os.path.join(OUT, 'steady_t')).read()) if os.path.exists(os.path.join(OUT, 'steady_t')) else None
for kind in sorted({s.kind for s in samples}):
    ks = [s for s in samples if s.kind == kind]
    # Private memory (RssAnon).  While the load runs, the data set grows (every
    # pass lists every object of the kind), and leaders are replaced every 20 s,
    # so growth then is no evidence of a leak.  Unbounded growth is judged in the
    # steady state after convergence: the same leader, the same data, resync
    # after resync, must stay flat.
    start = max([s.anon for s in ks if s.t - t0 < 30] or [ks[0].anon])
    peak = max(s.anon for s in ks)
    lead = [s for s in ks if s.role in ('leader', 'idle') and steady_t is not None and s.t >= steady_t]
    if lead:
        pid = lead[-1].pid
        st = [s for s in lead if s.pid == pid]
        # The median of the window's first quarter against that of its last: a pass that
        # frees a large context shows as one low sample (RssAnon 23.5 -> 19.6 MB for 2 s in
        # a flat projects leader), which first-against-last sampling read as 4 MB of growth.
        # A leak still moves the whole last quarter.
        q = max(1, len(st) // 4)
        a, b = int(statistics.median(x.anon for x in st[:q])), int(statistics.median(x.anon for x in st[-q:]))
        span = st[-1].t - st[0].t
        if b > a * 1.10 + 1024:
            rss_bad.append(f'{kind}: leader pid {pid} grew {a} -> {b} kB over {span} s of steady state')
    else:
        pid, a, b, span = '-', 0, 0, 0
        rss_bad.append(f'{kind}: no leader sampled in the steady state')
    rss_rows.append((kind, start, peak, pid, a, b, span))
check(samples and not rss_bad, 'worker RSS did not grow without bound (flat within 10% + 1 MB over the steady state)', rss_bad)

# ---------------------------------------------------------------- the table
conv = open(os.path.join(OUT, 'converge_ms')).read().strip()
actions = collections.Counter(i.action for i in intents)
print()
print(f'Soak: {DURATION} s of load, {CLIENTS} clients; {len(intents)} committed intents; {requests} requests at {"the fault proxy in front of the real API server" if REAL else AT}')
print()
print('| figure | value |')
print('|---|---|')
print(f'| committed intents | {len(intents)} ({", ".join(f"{a} {n}" for a, n in sorted(actions.items()))}) |')
print(f'| answers replayed from an idempotency key | {sum(1 for i in intents if i.replayed == "t")} '
      f'({replays} after an answer the client threw away) |')
print(f'| client retries with the same key | {sum(retries.values())} ({", ".join(f"{c} {n}" for c, n in retries.most_common())}) |')
print(f'| calls refused (definite answer, not retried) | {sum(refused.values())} ({", ".join(f"{a} {c} {n}" for (a, c), n in refused.most_common())}) |')
print(f'| intents abandoned by a client (retried {os.environ.get("SOAK_RETRY_MAX", 90)} s) | {len(abandoned)} |')
for k in ('5xx', '429 + Retry-After', 'dropped after apply', 'latency spike (1.5 s)'):
    print(f'| faults injected: {k} | {faults[k]} |')
print(f'| leader terminations (pg_terminate_backend) | {leader_kills} in {events["leader_kill"]} rounds |')
print(f'| leaders terminated mid-write (request held at {"the fault proxy" if REAL else AT}) | {held_kills} |')
print(f'| kill -9 of a worker (crash restarts) | {events["kill9"]} |')
print(f'| immediate stop + start of the server | {events["restart_end"]} |')
print(f'| time to converge after the last fault | {"not converged" if conv == "-" else f"{int(conv) / 1000:.1f} s"} |')
print(f'| converged / terminal with a reason / in flight | {len(converged)} / {len(terminal_reason)} / {len(in_flight)} |')
print(f'| duplicate external objects | {len(dups)} |')
print(f'| objects made again by a late write after their delete (found, recorded, deleted again) | {len(recreated)} |')
print(f'| lost intents | {len(lost)} |')
print(f'| audit exceptions (not exactly one event per intent) | {len(bad_audit)} |')
print(f'| ledger/{"API server" if REAL else "stand-in"} disagreements | {len(ledger_mismatch)} |')
print(f'| project objects at {AT} compared with the ledger (APPLY/ADOPT each) | {project_objects} |')
print(f'| READY projects whose quota, limits, network policy and bindings were compared | {tenancy_checked} |')
adopted = collections.Counter(l['kind'] for l in ledger if l['action'] == 'ADOPT' and l['outcome'] == 'OK')
print(f'| writes found applied after a lost answer (ledger ADOPT) | {", ".join(f"{k} {n}" for k, n in sorted(adopted.items())) or "0"} |')
print()
print('| worker kind | RssAnon at the start | peak during the soak | leader in the steady state: start → end |')
print('|---|---|---|---|')
for kind, start, peak, pid, a, b, span in rss_rows:
    steady = f'{a / 1024:.1f} → {b / 1024:.1f} MB over {span} s' if span else '(no leader sampled)' if pid == '-' else f'{a / 1024:.1f} MB'
    print(f'| {kind} | {start / 1024:.1f} MB | {peak / 1024:.1f} MB | {steady} |')
if terminal_reason:
    reasons = collections.Counter(w for _, w in terminal_reason)
    print()
    print('terminal with a reason: ' + '; '.join(f'{n} × {w}' for w, n in reasons.most_common(5)))
print()
failed = 0
for ok, what, detail in checks:
    print(f'{"ok" if ok else "not ok"} - {what}')
    if not ok:
        failed += 1
        for d in (detail or []):
            print(f'#   {d}')
print(f'# {len(checks) - failed} checks passed, {failed} failed')
sys.exit(1 if failed else 0)
