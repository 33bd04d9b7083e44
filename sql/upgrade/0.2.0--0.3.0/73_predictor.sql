-- 0.2.0 -> 0.3.0, part 73: model storage credentials (issue 17 item 5).  The InferenceService
-- render names the project's predictor ServiceAccount (mlplat.predictor_service_account), which
-- the projects reconciler makes with KServe's S3 annotations: it reads a setting, so STABLE.
ALTER FUNCTION mlplat._render_isvc(text, text, int, text, text, text, text, text, int, int, int, jsonb) STABLE;
