"""What vended keys may read, as an STS session policy: `VendingScope`, `session_policy`.

An AssumeRole session policy cuts the role's rights down to a table: `s3:GetObject`
on its prefixes (and on single objects, when a grant is exact), `s3:ListBucket`
only under those prefixes; for a writer of an own warehouse's table, also
`s3:PutObject`, `s3:DeleteObject` and multipart uploads under its location.
Nothing else: no other key of the bucket.
The policy language takes single objects, but its size is bounded (AWS: 2,048
characters of policy text), so an exact scope that does not fit is replaced by
the table's prefixes, its looser scope (`narrowest`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: AWS's bound on a session policy's text; stores that take more still get no more than this.
MAX_POLICY_CHARS = 2048
#: What a writer's keys may do to objects under its table's location, besides reading them.
WRITE_ACTIONS = ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]


@dataclass(frozen=True)
class VendingScope:
    """Objects vended keys may read: everything under `prefixes`, and the single `objects`; with
    `write`, they may also write and delete under `prefixes` (an own warehouse's writer)."""

    prefixes: tuple[tuple[str, str], ...]  # (bucket, key prefix ending in "/")
    objects: tuple[tuple[str, str], ...] = ()
    write: bool = False

    def allows(self, bucket: str, key: str) -> bool:
        """What the store will allow the keys to read (for tests and the audit line)."""
        return (bucket, key) in self.objects or any(
            bucket == b and key.startswith(prefix) for b, prefix in self.prefixes
        )

    def allows_write(self, bucket: str, key: str) -> bool:
        return self.write and any(bucket == b and key.startswith(prefix) for b, prefix in self.prefixes)

    def describe(self) -> list[str]:
        """The scope as `bucket/prefix*` and `bucket/key` lines (the audit log's), `(read, write)`
        after a prefix that may be written."""
        mark = " (read, write)" if self.write else ""
        return [f"{b}/{p}*{mark}" for b, p in self.prefixes] + [f"{b}/{k}" for b, k in self.objects]


def _arn(bucket: str, key: str) -> str:
    return f"arn:aws:s3:::{bucket}/{key}"


def session_policy(scope: VendingScope) -> dict[str, Any]:
    """The session policy that lets keys read `scope` and nothing else."""
    reads = [_arn(b, p) + "*" for b, p in scope.prefixes] + [_arn(b, k) for b, k in scope.objects]
    statements: list[dict[str, Any]] = [
        {"Sid": "ReadTable", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": sorted(set(reads))}
    ]
    if scope.write:
        # Writes only under the prefixes (a table's location), multipart uploads included.
        statements.append(
            {
                "Sid": "WriteTable",
                "Effect": "Allow",
                "Action": WRITE_ACTIONS,
                "Resource": sorted({_arn(b, p) + "*" for b, p in scope.prefixes}),
            }
        )
    listed: dict[str, set[str]] = {}
    for bucket, prefix in scope.prefixes:
        listed.setdefault(bucket, set()).update({prefix, prefix + "*"})
    for bucket, prefixes in sorted(listed.items()):
        statements.append(
            {
                "Sid": f"List{len(statements)}",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{bucket}"],
                "Condition": {"StringLike": {"s3:prefix": sorted(prefixes)}},
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def policy_text(scope: VendingScope) -> str:
    return json.dumps(session_policy(scope), separators=(",", ":"))


def prefixes_of(locations: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """(bucket, prefix) pairs, each ending in "/", without one that another contains."""
    normalized = sorted({(b, k.rstrip("/") + "/") for b, k in locations if b})
    kept: list[tuple[str, str]] = []
    for bucket, prefix in normalized:
        if not any(bucket == b and prefix.startswith(p) for b, p in kept):
            kept.append((bucket, prefix))
    return tuple(kept)


def narrowest(
    exact: VendingScope | None, loose: VendingScope, max_chars: int = MAX_POLICY_CHARS
) -> VendingScope:
    """`exact` when its policy fits in `max_chars`, else `loose` (which must fit)."""
    if exact is not None and len(policy_text(exact)) <= max_chars:
        return exact
    if len(policy_text(loose)) > max_chars:
        raise ValueError(f"the table's prefixes take a session policy over {max_chars} characters")
    return loose
