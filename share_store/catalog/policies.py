"""IAM-style policies of catalog users: which `s3tables:*` actions they may take on which resources.

A policy is the JSON IAM documents use, restricted to what this catalog
evaluates: `Version` (and `Id`), and `Statement`, one object or a list, each
with `Effect` (`Allow` or `Deny`), `Action` and `Resource` (a string or a list)
and an optional `Sid`. `NotAction`, `NotResource`, `Principal`, `Condition`,
policy variables and unknown keys are refused with `PolicyError` (400) rather
than ignored, since a policy read differently from what its author meant is
worse than one refused. So are actions outside `s3tables:` and `s3tables:`
actions this catalog does not know (a typo would silently deny).

Evaluation is IAM's: nothing is allowed unless a statement allows it, and a
statement that denies wins over any that allows, across all of a user's
policies. `*` (any run of characters, `/` included) and `?` (one character)
are wildcards in actions, matched without regard to case, and in resources,
matched with it.

Resources are named by ARNs with no region and no account:

    arn:aws:s3tables:::bucket/{warehouse}                                a warehouse
    arn:aws:s3tables:::bucket/{warehouse}/table/{namespace}/{table}      a table

where a nested namespace's levels are joined with `.` (`a.b` for `["a", "b"]`),
so `arn:aws:s3tables:::bucket/wh/table/*` names every table of `wh`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from share_store.errors import InvalidParameter

PREFIX = "s3tables:"
GET_TABLE_BUCKET = "s3tables:GetTableBucket"
LIST_TABLE_BUCKETS = "s3tables:ListTableBuckets"
CREATE_TABLE_BUCKET = "s3tables:CreateTableBucket"
DELETE_TABLE_BUCKET = "s3tables:DeleteTableBucket"
LIST_NAMESPACES = "s3tables:ListNamespaces"
GET_NAMESPACE = "s3tables:GetNamespace"
CREATE_NAMESPACE = "s3tables:CreateNamespace"
DELETE_NAMESPACE = "s3tables:DeleteNamespace"
UPDATE_NAMESPACE_PROPERTIES = "s3tables:UpdateNamespaceProperties"
LIST_TABLES = "s3tables:ListTables"
GET_TABLE = "s3tables:GetTable"
GET_TABLE_METADATA_LOCATION = "s3tables:GetTableMetadataLocation"
CREATE_TABLE = "s3tables:CreateTable"
UPDATE_TABLE_METADATA_LOCATION = "s3tables:UpdateTableMetadataLocation"
DELETE_TABLE = "s3tables:DeleteTable"
RENAME_TABLE = "s3tables:RenameTable"
REGISTER_TABLE = "s3tables:RegisterTable"
#: Not S3 Tables' (it has no undrop): Lakekeeper's, for a table or view dropped without purge.
UNDROP_TABLE = "s3tables:UndropTable"
PUT_TABLE_DATA = "s3tables:PutTableData"
GET_TABLE_DATA = "s3tables:GetTableData"
# Maintenance, as S3 Tables names it (share_store/catalog/maintenance/).
GET_TABLE_MAINTENANCE_CONFIGURATION = "s3tables:GetTableMaintenanceConfiguration"
PUT_TABLE_MAINTENANCE_CONFIGURATION = "s3tables:PutTableMaintenanceConfiguration"
GET_TABLE_MAINTENANCE_JOB_STATUS = "s3tables:GetTableMaintenanceJobStatus"
GET_TABLE_BUCKET_MAINTENANCE_CONFIGURATION = "s3tables:GetTableBucketMaintenanceConfiguration"
PUT_TABLE_BUCKET_MAINTENANCE_CONFIGURATION = "s3tables:PutTableBucketMaintenanceConfiguration"

#: Every action this catalog checks; a policy may name only these, or patterns with wildcards.
ACTIONS = frozenset(
    {
        GET_TABLE_BUCKET,
        LIST_TABLE_BUCKETS,
        CREATE_TABLE_BUCKET,
        DELETE_TABLE_BUCKET,
        LIST_NAMESPACES,
        GET_NAMESPACE,
        CREATE_NAMESPACE,
        DELETE_NAMESPACE,
        UPDATE_NAMESPACE_PROPERTIES,
        LIST_TABLES,
        GET_TABLE,
        GET_TABLE_METADATA_LOCATION,
        CREATE_TABLE,
        UPDATE_TABLE_METADATA_LOCATION,
        DELETE_TABLE,
        RENAME_TABLE,
        REGISTER_TABLE,
        UNDROP_TABLE,
        PUT_TABLE_DATA,
        GET_TABLE_DATA,
        GET_TABLE_MAINTENANCE_CONFIGURATION,
        PUT_TABLE_MAINTENANCE_CONFIGURATION,
        GET_TABLE_MAINTENANCE_JOB_STATUS,
        GET_TABLE_BUCKET_MAINTENANCE_CONFIGURATION,
        PUT_TABLE_BUCKET_MAINTENANCE_CONFIGURATION,
    }
)
_ACTIONS_LOWER = frozenset(action.lower() for action in ACTIONS)

ARN_PREFIX = "arn:aws:s3tables:::bucket/"
#: The versions IAM knows; neither changes how this catalog reads a policy.
VERSIONS = frozenset({"2012-10-17", "2008-10-17"})

#: Everything on every warehouse.
FULL_ACCESS_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3tables:*", "Resource": f"{ARN_PREFIX}*"}],
    },
    indent=2,
)
#: AIStor's documented example: read the warehouse `my-warehouse` and its tables, change nothing.
READ_ONLY_EXAMPLE_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "S3TablesReadOnlyWarehouse",
                "Effect": "Allow",
                "Action": [
                    "s3tables:GetTableBucket",
                    "s3tables:ListNamespaces",
                    "s3tables:GetNamespace",
                    "s3tables:ListTables",
                    "s3tables:GetTable",
                ],
                "Resource": [
                    "arn:aws:s3tables:::bucket/my-warehouse",
                    "arn:aws:s3tables:::bucket/my-warehouse/table/*",
                ],
            }
        ],
    },
    indent=2,
)

_POLICY_KEYS = frozenset({"Version", "Id", "Statement"})
_STATEMENT_KEYS = frozenset({"Sid", "Effect", "Action", "Resource"})
_UNSUPPORTED_KEYS = frozenset({"NotAction", "NotResource", "Principal", "NotPrincipal", "Condition"})
#: What each ARN field before the resource must be able to match, in order.
_ARN_FIELDS = (
    ("prefix", "arn"),
    ("partition", "aws"),
    ("service", "s3tables"),
    ("region", ""),
    ("account", ""),
)

Effect = Literal["Allow", "Deny"]


class PolicyError(InvalidParameter):
    """A policy document this catalog will not take; the message names what is wrong, on one line."""


def warehouse_arn(warehouse: str) -> str:
    return f"{ARN_PREFIX}{warehouse}"


def table_arn(warehouse: str, namespace_levels: Sequence[str], table: str) -> str:
    return f"{ARN_PREFIX}{warehouse}/table/{'.'.join(namespace_levels)}/{table}"


def _wildcard(pattern: str, *, ignore_case: bool) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(regex, re.DOTALL | (re.IGNORECASE if ignore_case else 0))


@dataclass(frozen=True)
class Statement:
    effect: Effect
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    sid: str | None = None
    _action_patterns: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _resource_patterns: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Compiled once: a policy is parsed when stored or loaded, and evaluated on every request.
        actions = tuple(_wildcard(action, ignore_case=True) for action in self.actions)
        resources = tuple(_wildcard(resource, ignore_case=False) for resource in self.resources)
        object.__setattr__(self, "_action_patterns", actions)
        object.__setattr__(self, "_resource_patterns", resources)

    def applies_to(self, action: str, resource: str) -> bool:
        return any(p.fullmatch(action) for p in self._action_patterns) and any(
            p.fullmatch(resource) for p in self._resource_patterns
        )


@dataclass(frozen=True)
class Policy:
    statements: tuple[Statement, ...]
    version: str | None = None

    def effect(self, action: str, resource: str) -> Effect | None:
        """`Deny` if a statement denies, else `Allow` if one allows, else `None` (denied by default)."""
        allowed = False
        for statement in self.statements:
            if statement.applies_to(action, resource):
                if statement.effect == "Deny":
                    return "Deny"
                allowed = True
        return "Allow" if allowed else None

    def allows(self, action: str, resource: str) -> bool:
        return self.effect(action, resource) == "Allow"

    def to_json(self) -> str:
        """The policy as a document `parse_policy` reads back to an equal policy."""
        document: dict[str, Any] = {"Version": self.version} if self.version else {}
        document["Statement"] = [
            {
                **({"Sid": statement.sid} if statement.sid is not None else {}),
                "Effect": statement.effect,
                "Action": list(statement.actions),
                "Resource": list(statement.resources),
            }
            for statement in self.statements
        ]
        return json.dumps(document, indent=2)


def policies_allow(policies: Iterable[Policy], action: str, resource: str) -> bool:
    """Whether a user holding all these policies may take `action` on `resource`: a Deny in any wins."""
    allowed = False
    for policy in policies:
        effect = policy.effect(action, resource)
        if effect == "Deny":
            return False
        allowed = allowed or effect == "Allow"
    return allowed


def parse_policy(document: str | bytes | Mapping[str, Any]) -> Policy:
    """The policy a JSON document (text, or already parsed) states; `PolicyError` naming what is wrong."""
    if isinstance(document, str | bytes):
        try:
            parsed = json.loads(document, object_pairs_hook=_refuse_duplicate_keys)
        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError and our duplicate keys
            raise PolicyError(f"the policy is not valid JSON: {error}") from None
    else:
        parsed = document
    if not isinstance(parsed, Mapping):
        raise PolicyError("the policy must be a JSON object with a Statement")
    unknown = sorted(set(parsed) - _POLICY_KEYS)
    if unknown:
        raise PolicyError(f"unsupported policy key {unknown[0]!r} (allowed: Version, Id, Statement)")
    version = parsed.get("Version")
    if version is not None and (not isinstance(version, str) or version not in VERSIONS):
        raise PolicyError(f'unknown policy Version {version!r} (use "2012-10-17")')
    policy_id = parsed.get("Id")
    if policy_id is not None and not isinstance(policy_id, str):
        raise PolicyError("the policy's Id must be a string")
    if "Statement" not in parsed:
        raise PolicyError("the policy has no Statement")
    raw = parsed["Statement"]
    listed = [raw] if isinstance(raw, Mapping) else raw
    if not isinstance(listed, list) or not listed:
        raise PolicyError("the policy's Statement must be an object or a non-empty list of them")
    statements = tuple(_parse_statement(statement, index) for index, statement in enumerate(listed, 1))
    return Policy(statements=statements, version=version)


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # A second "Effect" would silently replace the first: refused like IAM does.
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _parse_statement(raw: Any, index: int) -> Statement:
    if not isinstance(raw, Mapping):
        raise PolicyError(f"statement {index} is not a JSON object")
    sid = raw.get("Sid")
    where = f"statement {sid!r}" if isinstance(sid, str) and sid else f"statement {index}"
    for key in sorted(raw):
        if key in _UNSUPPORTED_KEYS:
            raise PolicyError(f"{where}: {key} is not supported (use Effect, Action and Resource)")
        if key not in _STATEMENT_KEYS:
            raise PolicyError(f"{where}: unknown key {key!r} (allowed: Sid, Effect, Action, Resource)")
    if sid is not None and not isinstance(sid, str):
        raise PolicyError(f"{where}: Sid must be a string")
    effect = raw.get("Effect")
    if effect not in ("Allow", "Deny"):
        shown = "no Effect" if effect is None else f"Effect {effect!r}"
        raise PolicyError(f'{where}: {shown}; it must be "Allow" or "Deny"')
    actions = _strings(raw, "Action", where)
    for action in actions:
        _check_action(action, where)
    resources = _strings(raw, "Resource", where)
    for resource in resources:
        _check_resource(resource, where)
    return Statement(effect=effect, actions=actions, resources=resources, sid=sid)


def _strings(raw: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    if key not in raw:
        raise PolicyError(f"{where}: no {key}")
    value = raw[key]
    listed = [value] if isinstance(value, str) else value
    if (
        not isinstance(listed, list)
        or not listed
        or not all(isinstance(item, str) and item for item in listed)
    ):
        raise PolicyError(f"{where}: {key} must be a non-empty string or a non-empty list of them")
    return tuple(listed)


def _check_action(action: str, where: str) -> None:
    if not action.lower().startswith(PREFIX):
        hint = ' (for every action, "s3tables:*")' if action == "*" else ""
        raise PolicyError(f"{where}: action {action!r} is not an s3tables: action{hint}")
    if "*" not in action and "?" not in action and action.lower() not in _ACTIONS_LOWER:
        raise PolicyError(f"{where}: unknown action {action!r}")


def _check_resource(resource: str, where: str) -> None:
    """Refuse resources that could never name one of our ARNs: they would deny without a word.

    Fields are checked up to the first `*`, which may stand for several of them.
    """
    if "${" in resource:
        raise PolicyError(f"{where}: policy variables are not supported, in resource {resource!r}")
    if resource == "*":
        return
    fields = resource.split(":", 5)
    if "*" not in fields[0] and fields[0] != "arn":
        raise PolicyError(f"{where}: resource {resource!r} is not an ARN ({ARN_PREFIX}{{warehouse}})")
    for (name, ours), part in zip(_ARN_FIELDS, fields, strict=False):
        if "*" in part:
            return
        if not _wildcard(part, ignore_case=False).fullmatch(ours):
            expected = f"'{ours}'" if ours else "empty"
            raise PolicyError(
                f"{where}: resource {resource!r} cannot name a warehouse or table: its {name} must be "
                f"{expected} ({ARN_PREFIX}{{warehouse}}[/table/{{namespace}}/{{table}}])"
            )
    if len(fields) < 6:
        raise PolicyError(f"{where}: resource {resource!r} is not an ARN ({ARN_PREFIX}{{warehouse}})")
    literal = re.split(r"[*?]", fields[5], maxsplit=1)[0]
    if not (literal.startswith("bucket/") or (literal != fields[5] and "bucket/".startswith(literal))):
        raise PolicyError(
            f"{where}: resource {resource!r} cannot name a warehouse or table: "
            f"expected {ARN_PREFIX}{{warehouse}}[/table/{{namespace}}/{{table}}]"
        )
