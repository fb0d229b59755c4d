"""Every URL path the server answers, spelled once.

The route tables (`app`, `admin_routes`), the admin API's client, the OAuth
profiles and the probes' middleware all name these paths; with one spelling, a
path cannot be renamed in some of them and not the others. Templates use
Starlette's `{name}` (and `{name:path}`) parameters.
"""

from __future__ import annotations

# -- the service's own endpoints, at the root whatever the protocol prefix --------------

HEALTHZ = "/healthz"
OPENAPI = "/openapi.json"
METRICS = "/metrics"

# -- the Delta Sharing protocol, relative to the configured prefix (`[server] prefix`) --

SHARES = "/shares"
SHARE = SHARES + "/{share}"
SCHEMAS = SHARE + "/schemas"
TABLES = SCHEMAS + "/{schema}/tables"
ALL_TABLES = SHARE + "/all-tables"
TABLE = TABLES + "/{table}"
TABLE_VERSION = TABLE + "/version"
TABLE_METADATA = TABLE + "/metadata"
TABLE_QUERY = TABLE + "/query"
TABLE_CHANGES = TABLE + "/changes"
TABLE_CREDENTIALS = TABLE + "/temporary-table-credentials"
# An async query's poll (2026-07): its status, then its lines.
TABLE_QUERY_INFO = TABLE + "/queries/{query_id}"
# Where OAuth client credentials profiles get their bearer tokens.
OAUTH_TOKEN = "/oauth/token"  # noqa: S105 - a URL path, not a secret
# Local storage's signed file URLs; the key may span several path segments.
FILES = "/files"
FILE = FILES + "/{bucket}/{key:path}"

# -- the admin API, under a fixed prefix of its own -------------------------------------

ADMIN_PREFIX = "/admin/v1"
ADMIN_SHARES = "/shares"
ADMIN_SHARE = ADMIN_SHARES + "/{share}"
ADMIN_TOKENS = ADMIN_SHARE + "/tokens"
ADMIN_TOKEN = ADMIN_TOKENS + "/{token_id}"
ADMIN_TOKEN_ROTATE = ADMIN_TOKEN + "/rotate"
ADMIN_OAUTH_CLIENTS = ADMIN_SHARE + "/oauth-clients"
ADMIN_OAUTH_CLIENT = ADMIN_OAUTH_CLIENTS + "/{client_id}"
ADMIN_TABLE_RESTRICTION = ADMIN_SHARE + "/schemas/{schema}/tables/{table}/restriction"
ADMIN_HEALTH = "/health"
ADMIN_RECIPIENTS = "/recipients"
ADMIN_RECIPIENT = ADMIN_RECIPIENTS + "/{recipient}"
ADMIN_RECIPIENT_SHARES = ADMIN_RECIPIENT + "/shares"
ADMIN_RECIPIENT_SHARE = ADMIN_RECIPIENT_SHARES + "/{share}"
ADMIN_RECIPIENT_TOKENS = ADMIN_RECIPIENT + "/tokens"
ADMIN_RECIPIENT_TOKEN = ADMIN_RECIPIENT_TOKENS + "/{token_id}"
#: A recipient token's one-time activation link, under the protocol's prefix (no auth: the code is the key).
ACTIVATION = "/activation/{code}"

# -- the Iceberg REST catalog over the same shares, under a fixed prefix of its own -----

ICEBERG_PREFIX = "/iceberg"
ICEBERG_CONFIG = "/v1/config"
ICEBERG_OAUTH_TOKENS = "/v1/oauth/tokens"
ICEBERG_NAMESPACES = "/v1/namespaces"
ICEBERG_NAMESPACE = ICEBERG_NAMESPACES + "/{namespace}"
ICEBERG_TABLES = ICEBERG_NAMESPACE + "/tables"
ICEBERG_TABLE = ICEBERG_TABLES + "/{table}"
ICEBERG_CREDENTIALS = ICEBERG_TABLE + "/credentials"
# Server-side scan planning (sharing_server/iceberg_shares/scan_plans.py).
ICEBERG_TABLE_PLAN = ICEBERG_TABLE + "/plan"
ICEBERG_TABLE_PLAN_ID = ICEBERG_TABLE_PLAN + "/{plan_id}"
ICEBERG_TABLE_TASKS = ICEBERG_TABLE + "/tasks"
ICEBERG_TABLE_SIGN = ICEBERG_TABLE + "/sign"  # the spec's signer (1.11)
ICEBERG_S3_SIGN = "/v1/aws/s3/sign"
# The same catalog with the share named (OpenSharing's form: the prefix `shares/<share>` that
# `GET /v1/config?warehouse=<share>` answers), for any token the share is open to.
ICEBERG_SHARE = "/v1/shares/{share}"
ICEBERG_SHARE_CONFIG = ICEBERG_SHARE + "/config"
ICEBERG_SHARE_NAMESPACES = ICEBERG_SHARE + "/namespaces"
ICEBERG_SHARE_NAMESPACE = ICEBERG_SHARE_NAMESPACES + "/{namespace}"
ICEBERG_SHARE_TABLES = ICEBERG_SHARE_NAMESPACE + "/tables"
ICEBERG_SHARE_TABLE = ICEBERG_SHARE_TABLES + "/{table}"
ICEBERG_SHARE_CREDENTIALS = ICEBERG_SHARE_TABLE + "/credentials"
ICEBERG_SHARE_TABLE_PLAN = ICEBERG_SHARE_TABLE + "/plan"
ICEBERG_SHARE_TABLE_PLAN_ID = ICEBERG_SHARE_TABLE_PLAN + "/{plan_id}"
ICEBERG_SHARE_TABLE_TASKS = ICEBERG_SHARE_TABLE + "/tasks"
ICEBERG_SHARE_TABLE_SIGN = ICEBERG_SHARE_TABLE + "/sign"
ICEBERG_SHARE_METRICS = ICEBERG_SHARE_TABLE + "/metrics"
ICEBERG_SHARE_S3_SIGN = ICEBERG_SHARE + "/aws/s3/sign"
# Anything else under the prefix: every write endpoint of the spec lands here.
ICEBERG_OTHER = "/{rest:path}"

# -- AIStor Tables: the provider's writable Iceberg REST catalog -------------------------

WAREHOUSE_PREFIX = "/_iceberg"
WAREHOUSE_CONFIG = "/v1/config"
WAREHOUSE_OAUTH_TOKENS = "/v1/oauth/tokens"
WAREHOUSES = "/v1/warehouses"
WAREHOUSE = WAREHOUSES + "/{warehouse}"
WAREHOUSE_PROPERTIES = WAREHOUSE + "/properties"
WAREHOUSE_NAMESPACES = "/v1/{prefix}/namespaces"
WAREHOUSE_NAMESPACE = WAREHOUSE_NAMESPACES + "/{namespace}"
WAREHOUSE_NAMESPACE_PROPERTIES = WAREHOUSE_NAMESPACE + "/properties"
WAREHOUSE_TABLES = WAREHOUSE_NAMESPACE + "/tables"
WAREHOUSE_TABLE = WAREHOUSE_TABLES + "/{table}"
WAREHOUSE_TABLE_METRICS = WAREHOUSE_TABLE + "/metrics"
WAREHOUSE_TABLE_CREDENTIALS = WAREHOUSE_TABLE + "/credentials"
# Server-side scan planning (sharing_server/catalog/scan_plans.py).
WAREHOUSE_TABLE_PLAN = WAREHOUSE_TABLE + "/plan"
WAREHOUSE_TABLE_PLAN_ID = WAREHOUSE_TABLE_PLAN + "/{plan_id}"
WAREHOUSE_TABLE_TASKS = WAREHOUSE_TABLE + "/tasks"
WAREHOUSE_TABLE_SIGN = WAREHOUSE_TABLE + "/sign"  # the spec's signer (1.11), beside s3-sign/{grant}
#: The writers' remote signer: a grant handed out with a table load names the table and the caller.
WAREHOUSE_S3_SIGN = "/v1/{prefix}/s3-sign/{grant}"
WAREHOUSE_REGISTER = WAREHOUSE_NAMESPACE + "/register"
WAREHOUSE_RENAME = "/v1/{prefix}/tables/rename"
WAREHOUSE_UNDROP = "/v1/{prefix}/tables/undrop"
WAREHOUSE_TRANSACTIONS = "/v1/{prefix}/transactions/commit"
WAREHOUSE_VIEWS = WAREHOUSE_NAMESPACE + "/views"
WAREHOUSE_VIEW = WAREHOUSE_VIEWS + "/{view}"
WAREHOUSE_REGISTER_VIEW = WAREHOUSE_NAMESPACE + "/register-view"
WAREHOUSE_VIEW_RENAME = "/v1/{prefix}/views/rename"
WAREHOUSE_VIEW_UNDROP = "/v1/{prefix}/views/undrop"
# Maintenance (sharing_server/catalog/maintenance.py), in the spirit of S3 Tables' API.
WAREHOUSE_MAINTENANCE = WAREHOUSE + "/maintenance"
WAREHOUSE_MAINTENANCE_KIND = WAREHOUSE_MAINTENANCE + "/{kind}"
WAREHOUSE_TABLE_MAINTENANCE = WAREHOUSE_TABLE + "/maintenance"
WAREHOUSE_TABLE_MAINTENANCE_KIND = WAREHOUSE_TABLE_MAINTENANCE + "/{kind}"
WAREHOUSE_TABLE_MAINTENANCE_RUN = WAREHOUSE_TABLE_MAINTENANCE + "/run"
WAREHOUSE_TABLE_MAINTENANCE_STATUS = WAREHOUSE_TABLE + "/maintenance-job-status"
WAREHOUSE_OTHER = "/{rest:path}"

# -- the providers' web console (HTML pages, behind the admin token) --------------------

CONSOLE_PREFIX = "/console"
