--
-- mlplat.spec_diff(desired, observed): default-aware drift detection.
-- Only fields present in desired are compared; rules in docs/drift.md.
--
CREATE FUNCTION pg_temp.drift(d jsonb, o jsonb)
RETURNS TABLE (path text, desired jsonb, observed jsonb, observed_present boolean)
LANGUAGE sql AS $$
  SELECT e->>'path', e->'desired', e->'observed', e ? 'observed'
  FROM jsonb_array_elements(mlplat.spec_diff(d, o)) e
$$;

-- A desired InferenceService as we render it, and what KServe reports back:
-- defaulted fields dropped (initialDelaySeconds: 0, empty env), quantities
-- respelled, env reordered, fields we never set added.
CREATE TEMP TABLE isvc AS SELECT
 '{"apiVersion":"serving.kserve.io/v1beta1","kind":"InferenceService",
   "metadata":{"name":"m1","labels":{"app.kubernetes.io/managed-by":"mlplat"}},
   "spec":{"predictor":{"minReplicas":1,"model":{
     "modelFormat":{"name":"sklearn"},"storageUri":"s3://models/m1/3",
     "resources":{"requests":{"cpu":"1","memory":"2Gi"},"limits":{"cpu":"1000m","memory":"2Gi","nvidia.com/gpu":1}},
     "readinessProbe":{"httpGet":{"path":"/v2/health/ready","port":8080},"initialDelaySeconds":0,"periodSeconds":10},
     "env":[{"name":"MODEL_NAME","value":"m1"},
            {"name":"API_TOKEN","valueFrom":{"secretKeyRef":{"name":"m1-token","key":"token"}}}],
     "ports":[{"containerPort":8080,"protocol":"TCP"}],
     "args":[]}}}}'::jsonb AS desired,
 '{"apiVersion":"serving.kserve.io/v1beta1","kind":"InferenceService",
   "metadata":{"name":"m1","generation":4,"labels":{"app.kubernetes.io/managed-by":"mlplat"},
               "annotations":{"serving.kserve.io/deploymentMode":"Serverless"}},
   "spec":{"predictor":{"minReplicas":1.0,"model":{
     "modelFormat":{"name":"sklearn"},"storageUri":"s3://models/m1/3","protocolVersion":"v2",
     "resources":{"requests":{"cpu":"1000m","memory":"2147483648"},"limits":{"cpu":1,"memory":"2048Mi","nvidia.com/gpu":"1"}},
     "readinessProbe":{"httpGet":{"path":"/v2/health/ready","port":8080},"timeoutSeconds":1,"failureThreshold":3},
     "env":[{"name":"API_TOKEN","valueFrom":{"secretKeyRef":{"name":"m1-token","key":"token"}}},
            {"name":"MODEL_NAME","value":"m1"},{"name":"INJECTED_BY_WEBHOOK","value":"x"}],
     "ports":[{"containerPort":8080}]}}},
   "status":{"url":"http://m1.mlp-p1.example.com"}}'::jsonb AS observed;

-- KServe's defaulting alone is not drift
SELECT mlplat.spec_diff(desired, observed) FROM isvc;
-- and a document never drifts from itself
SELECT mlplat.spec_diff(desired, desired), mlplat.spec_diff(observed, observed) FROM isvc;

-- seed case 1: absent readinessProbe.initialDelaySeconds means 0: not drift
SELECT * FROM pg_temp.drift('{"readinessProbe":{"initialDelaySeconds":0}}', '{"readinessProbe":{}}');
-- seed case 2: an absent env list equals an empty one: not drift
SELECT * FROM pg_temp.drift('{"containers":[{"name":"kserve-container","env":[]}]}', '{"containers":[{"name":"kserve-container"}]}');
-- seed case 3: a changed non-zero probe delay is drift
SELECT d.* FROM isvc,
  pg_temp.drift(jsonb_set(desired, '{spec,predictor,model,readinessProbe,initialDelaySeconds}', '5'),
                jsonb_set(observed, '{spec,predictor,model,readinessProbe,initialDelaySeconds}', '10')) d;
-- seed case 4: a removed secret reference is drift (the whole env entry gone) ...
SELECT d.* FROM isvc, pg_temp.drift(desired, jsonb_set(observed, '{spec,predictor,model,env}', '[{"name":"MODEL_NAME","value":"m1"}]')) d;
-- ... and the reference removed from an entry that is still there
SELECT d.* FROM isvc, pg_temp.drift(desired, jsonb_set(observed, '{spec,predictor,model,env,0}', '{"name":"API_TOKEN","value":""}')) d;
-- other real drift: image/storage URI, replicas, resources, a label
SELECT d.* FROM isvc, pg_temp.drift(desired,
  jsonb_set(jsonb_set(jsonb_set(jsonb_set(observed,
    '{spec,predictor,model,storageUri}', '"s3://models/m1/2"'),
    '{spec,predictor,minReplicas}', '2'),
    '{spec,predictor,model,resources,limits,memory}', '"2G"'),
    '{metadata,labels,app.kubernetes.io/managed-by}', '"x"')) d;

-- probe defaults (core/v1 Probe): timeoutSeconds 1, periodSeconds 10, successThreshold 1, failureThreshold 3
SELECT * FROM pg_temp.drift('{"livenessProbe":{"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"startupProbe":{"periodSeconds":10.0,"initialDelaySeconds":0}}',
                            '{"livenessProbe":{},"startupProbe":{}}');
-- a non-default value that is absent is drift, and so is a default that was changed
SELECT * FROM pg_temp.drift('{"readinessProbe":{"periodSeconds":5,"initialDelaySeconds":0,"failureThreshold":3}}',
                            '{"readinessProbe":{"initialDelaySeconds":3,"failureThreshold":5}}');
-- a default only applies where it is defined: initialDelaySeconds elsewhere is an ordinary field
SELECT * FROM pg_temp.drift('{"job":{"initialDelaySeconds":0}}', '{"job":{}}');

-- absent list == empty list, absent map == empty map, null == absent
SELECT * FROM pg_temp.drift('{"args":[],"metadata":{"annotations":{}},"volumes":[]}', '{"metadata":{}}');
SELECT * FROM pg_temp.drift('{"args":[]}', '{"args":null}');
-- but a non-empty list or map that is absent is drift
SELECT * FROM pg_temp.drift('{"args":["--workers","2"],"nodeSelector":{"gpu":"a100"}}', '{}');

-- quantities compare by value
SELECT * FROM pg_temp.drift(
  '{"resources":{"requests":{"cpu":"1","memory":"1Gi","ephemeral-storage":"1k"},"limits":{"cpu":"500m","memory":"1.5Gi","nvidia.com/gpu":2}}}',
  '{"resources":{"requests":{"cpu":1,"memory":"1073741824","ephemeral-storage":"1000"},"limits":{"cpu":0.5,"memory":"1536Mi","nvidia.com/gpu":"2"}}}');
SELECT * FROM pg_temp.drift('{"resources":{"limits":{"cpu":"2","memory":"1Gi"}}}',
                            '{"resources":{"limits":{"cpu":"1500m","memory":"1G"}}}');
-- ResourceQuota and LimitRange quantities too
SELECT * FROM pg_temp.drift('{"spec":{"hard":{"requests.nvidia.com/gpu":"4","limits.memory":"64Gi"}}}',
                            '{"spec":{"hard":{"requests.nvidia.com/gpu":4,"limits.memory":"68719476736"}}}');
SELECT * FROM pg_temp.drift('{"spec":{"limits":[{"type":"Container","default":{"cpu":"1"},"defaultRequest":{"cpu":"100m"}}]}}',
                            '{"spec":{"limits":[{"type":"Container","default":{"cpu":"1000m"},"defaultRequest":{"cpu":0.1}}]}}');
-- outside quantity positions "1" and "1000m" are different strings
SELECT * FROM pg_temp.drift('{"metadata":{"labels":{"cpu":"1"}}}', '{"metadata":{"labels":{"cpu":"1000m"}}}');

-- numbers compare numerically; a number is not a string
SELECT * FROM pg_temp.drift('{"replicas":1,"weights":[1.0,0.50]}', '{"replicas":1.0,"weights":[1,0.5]}');
SELECT * FROM pg_temp.drift('{"replicas":1}', '{"replicas":"1"}');

-- keyed lists: env and containers by name, ports by containerPort (order-insensitive;
-- entries desired does not name belong to someone else)
SELECT * FROM pg_temp.drift(
  '{"containers":[{"name":"a","image":"i:1","ports":[{"containerPort":8080},{"containerPort":9090,"name":"metrics"}]},{"name":"b","image":"j:1"}]}',
  '{"containers":[{"name":"istio-proxy","image":"proxy"},{"name":"b","image":"j:2"},{"name":"a","image":"i:1","ports":[{"containerPort":9090,"name":"prom"},{"containerPort":8080,"protocol":"TCP"}]}]}');
SELECT * FROM pg_temp.drift('{"volumeMounts":[{"mountPath":"/mnt/models","name":"m","readOnly":true}],"volumes":[{"name":"m","emptyDir":{}}]}',
                            '{"volumeMounts":[{"mountPath":"/mnt/models","name":"m","readOnly":false}],"volumes":[{"name":"m"}]}');
-- a protocol other than the default, absent, is drift
SELECT * FROM pg_temp.drift('{"ports":[{"containerPort":53,"protocol":"UDP"}]}', '{"ports":[{"containerPort":53}]}');
-- other lists are atomic: order and length matter
SELECT * FROM pg_temp.drift('{"args":["a","b"]}', '{"args":["b","a"]}');
SELECT * FROM pg_temp.drift('{"args":["a"]}', '{"args":["a","b"]}');
-- a keyed list whose keys repeat falls back to position
SELECT * FROM pg_temp.drift('{"env":[{"name":"A","value":"1"},{"name":"A","value":"2"}]}',
                            '{"env":[{"name":"A","value":"1"},{"name":"A","value":"3"}]}');

-- type changes, desired null (server-side apply would remove the field), odd keys, top level
SELECT * FROM pg_temp.drift('{"a":{"b":1},"c":null}', '{"a":7,"c":false}');
SELECT * FROM pg_temp.drift('{"metadata":{"annotations":{"a.b/c d":"1"}}}', '{"metadata":{"annotations":{"a.b/c d":"2"}}}');
SELECT mlplat.spec_diff('[1,2]', '[1,3]'), mlplat.spec_diff('1', '"1"'), mlplat.spec_diff('{"a":1}', 'null');
SELECT mlplat.spec_diff(NULL, '{}') IS NULL AS strict;
-- what JSON cannot carry is refused
SELECT mlplat.spec_diff('{"a":1}', '{"a":1e400}');
