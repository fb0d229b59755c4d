"""Faults across replicas, CI-sized (issue 53): three replicas on one PostgreSQL and one SeaweedFS,
each reached through a fault proxy, under a mixed load of recipients, writers and a provider; each
fault once (PostgreSQL black-holed, reset, refused; S3 black-holed, slowed, refused), a few
seconds each. The scenario is tests/fault_soak.py's (its checks tests/fault_answers.py's and
tests/fault_outcome.py's), which `make soak` runs long.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.seaweed import SeaweedS3
from tests import fault_soak
from tests.fault_answers import model_violations
from tests.fault_outcome import RECOVERY_LIMIT, Outcome
from tests.postgres import Postgres


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory, postgres: Postgres, seaweed: SeaweedS3) -> Outcome:
    tmp: Path = tmp_path_factory.mktemp("faults")
    store_url = postgres.create_database("faults_across_replicas")
    try:
        with fault_soak.rig(tmp, store_url, seaweed) as rig:
            result = fault_soak.run(rig, seconds=0)
        print(result.report())
        return result
    finally:
        postgres.drop_database("faults_across_replicas")


def test_every_fault_met_the_load(outcome: Outcome) -> None:
    assert [run.name for run in outcome.runs] == list(fault_soak.FAULTS)
    assert len(outcome.ledger.acked) > 0 and outcome.ledger.delta_reads > 0 and outcome.ledger.iceberg_reads
    assert outcome.ledger.revoked > 0


def test_no_acknowledged_append_lost_or_doubled(outcome: Outcome) -> None:
    assert outcome.lost == []
    assert outcome.doubled == []


def test_every_answer_with_rows_is_of_its_version(outcome: Outcome) -> None:
    assert outcome.ledger.wrong_delta == []
    assert outcome.wrong_iceberg == []


def test_every_replica_recovers_within_30_s_without_a_restart(outcome: Outcome) -> None:
    for run in outcome.runs:
        assert len(run.recovery) == 3, run
        assert max(run.recovery.values()) <= RECOVERY_LIMIT, run
    assert all(outcome.alive.values()), outcome.alive


def test_no_request_hung_over_60_s(outcome: Outcome) -> None:
    assert outcome.hung == []
    assert outcome.stuck_threads == 0


def test_a_revoked_token_is_refused_everywhere_within_1_s(outcome: Outcome) -> None:
    assert outcome.ledger.revocation_misses == []


def test_every_error_answer_is_in_its_surfaces_model(outcome: Outcome) -> None:
    violations = model_violations(outcome.answers)
    assert violations == [], sorted(set(violations))


def test_no_fault_is_answered_500(outcome: Outcome) -> None:
    assert outcome.server_errors == []


def test_the_audit_log_records_the_status_each_client_got(outcome: Outcome) -> None:
    assert outcome.audit_mismatches == [], sorted(set(outcome.audit_mismatches))[:20]


def test_version_0_of_the_table_shared_while_empty_stays_readable(outcome: Outcome) -> None:
    assert set(outcome.version_zero.values()) == {200}, outcome.version_zero
