"""`sharing-server table user …`: catalog users (SigV4 keys and a policy), on the store only."""

from __future__ import annotations

import argparse
from pathlib import Path

from share_store.catalog.policies import FULL_ACCESS_POLICY, Policy, parse_policy
from share_store.catalog.users import CatalogUsers
from share_store.errors import InvalidParameter


def run_user(users: CatalogUsers, args: argparse.Namespace) -> None:
    if args.what == "user create":
        policy = _policy_text(args.policy) if args.policy else None
        issued = users.create(args.name, policy)
        print(f"User:       {issued.name}")
        print(f"Access key: {issued.access_key}")
        print(f"Secret key: {issued.secret_key}")
        print(f"Policy:     {_policy_summary(issued.policy)}")
        print("The secret key is shown once; it is stored only sealed with the server key.")
    elif args.what == "user list":
        for user in users.list():
            print(f"{user.name}\t{user.access_key}\t{_policy_summary(user.policy)}")
    elif args.what == "user remove":
        users.remove(args.name)
        print(f"Removed catalog user '{args.name}'; its keys and tokens stop working.")


def _policy_text(path: Path) -> str:
    try:
        return path.read_bytes().decode()
    except UnicodeDecodeError:
        raise InvalidParameter(f"the policy file {path} is not UTF-8 text") from None


def _policy_summary(policy: Policy) -> str:
    if policy == parse_policy(FULL_ACCESS_POLICY):
        return "full access"
    return f"{len(policy.statements)} statement(s)"
