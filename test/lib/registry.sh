# test/lib/registry.sh — the model registry (MLflow) in the scripts that check what the
# model_aliases kind did there: mlplat pointed at it and back, the registry read as an
# outside client reads it, an alias waited for.  Loaded after e2e.sh (q, $PSQL, $DB; the
# stand-in's STANDIN_URL and STANDIN_TOKEN are read when a function runs).

# registry_connect [URL [TOKEN_FILE]] — mlplat pointed at the registry at URL (the stand-in's,
# $STANDIN_URL, by default) with the bearer token in TOKEN_FILE ($STANDIN_TOKEN_FILE when not
# given; an empty one: no bearer token, as with HTTP Basic), reloaded
registry_connect() {
	$PSQL -d "$DB" -c "ALTER SYSTEM SET mlplat.registry_url = '${1:-$STANDIN_URL}'" \
		-c "ALTER SYSTEM SET mlplat.registry_token_file = '${2-$STANDIN_TOKEN_FILE}'" -c "SELECT pg_reload_conf()" >/dev/null
}

# registry_disconnect — mlplat without a registry again: every registry setting and the
# backoff cap (ALTER SYSTEM RESET, reloaded)
registry_disconnect() {
	$PSQL -d "$DB" -c "ALTER SYSTEM RESET mlplat.registry_url" -c "ALTER SYSTEM RESET mlplat.registry_token_file" \
		-c "ALTER SYSTEM RESET mlplat.registry_basic_auth_file" -c "ALTER SYSTEM RESET mlplat.registry_ca_file" \
		-c "ALTER SYSTEM RESET mlplat.backoff_max" -c "SELECT pg_reload_conf()" >/dev/null
}

# mlflow METHOD ENDPOINT [JSON] — the registry's REST API as an outside client: the
# stand-in's (its bearer token), or the one at MLFLOW_URL (HTTP Basic as MLFLOW_USER, when set)
mlflow() {
	if [ -n "${MLFLOW_URL:-}" ]; then
		curl -s -X "$1" ${MLFLOW_USER:+-u "$MLFLOW_USER"} "$MLFLOW_URL/api/2.0/mlflow/$2" \
			${3:+-H 'Content-Type: application/json' -d "$3"}
	else
		curl -s -X "$1" -H "Authorization: Bearer $STANDIN_TOKEN" "$STANDIN_URL/api/2.0/mlflow/$2" \
			${3:+-H 'Content-Type: application/json' -d "$3"}
	fi
}

# alias_of ALIAS — the registry version alias ALIAS of the registered model $RM points at
# ("<registry version>/<mlplat.version tag>" when ALIAS_TAGS=1), or the registry's error code
alias_of() {
	mlflow GET "registered-models/alias?name=$RM&alias=$1" | python3 -c '
import json, sys
o = json.load(sys.stdin)
if "model_version" in o:
    mv = o["model_version"]
    tags = {x["key"]: x["value"] for x in mv.get("tags", [])}
    print(mv["version"] + ("/" + tags.get("mlplat.version", "?") if sys.argv[1] == "1" else ""))
else:
    print(o.get("error_code", "?"))' "${ALIAS_TAGS:-0}"
}

# wait_alias ALIAS EXPECTED SECONDS — poll alias_of until it says EXPECTED
wait_alias() { wait_says "$3" "$2" alias_of "$1"; }
