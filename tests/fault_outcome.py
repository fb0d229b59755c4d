"""What the fault soak found (tests/fault_soak.py): the clients' ledger, each fault's run and the
replicas' recovery from it, and the outcome's checks and report.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from dataclasses import dataclass, field

from tests.fault_answers import HUNG, Answer, model_violations

#: How long each fault lasts (the issue's runs black-holed the database for 10 s).
FAULT_SECONDS = float(os.environ.get("SOAK_FAULT_SECONDS", "10"))
#: What must hold: recovery after a fault's end, a revocation's reach.
RECOVERY_LIMIT = 30.0
REVOKED_WITHIN = 1.0


@dataclass
class Ledger:
    """What the clients did: acknowledged and failed appends, reads with rows, revocations."""

    acked: dict[str, int] = field(default_factory=dict)  # id → the snapshot its append made
    failed: set[str] = field(default_factory=set)
    delta_reads: int = 0
    wrong_delta: list[str] = field(default_factory=list)
    iceberg_reads: list[tuple[set[int], list[str]]] = field(default_factory=list)  # ancestry, ids
    revoked: int = 0
    revocation_misses: list[str] = field(default_factory=list)
    client_failures: Counter[str] = field(default_factory=Counter)
    #: The first failure of each kind: when, and its message (cut short).
    failure_examples: dict[str, tuple[float, str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class FaultRun:
    name: str
    started: float
    ended: float
    recovery: dict[str, float] = field(default_factory=dict)  # replica → seconds after the end


@dataclass
class Outcome:
    runs: list[FaultRun]
    ledger: Ledger
    answers: list[Answer]
    final_ids: Counter[str]
    rss: dict[str, int]
    alive: dict[str, bool]
    stuck_threads: int
    seconds: float
    #: Answers whose audit line is missing or names another status than the client got.
    audit_mismatches: list[str] = field(default_factory=list)
    #: The status of each replica's Delta Sharing query of the Iceberg table at version 0 (shared
    #: while it was empty) after every fault.
    version_zero: dict[str, int | None] = field(default_factory=dict)
    #: Open descriptors of each replica at the end, and the connections through each proxy.
    descriptors: dict[str, int] = field(default_factory=dict)
    proxied: dict[str, int] = field(default_factory=dict)
    rss_before: dict[str, int] = field(default_factory=dict)  # KiB, as the load began

    @property
    def server_errors(self) -> list[str]:
        """5xx answers other than an outage's 503: a fault must never be a 500."""
        return sorted(
            f"{a.method} {a.path} {a.status}"
            for a in self.answers
            if a.status is not None and a.status >= 500 and a.status != 503
        )

    @property
    def lost(self) -> list[str]:
        return sorted(i for i in self.ledger.acked if self.final_ids[i] == 0)

    @property
    def doubled(self) -> list[str]:
        return sorted(i for i, count in self.final_ids.items() if count > 1)

    @property
    def wrong_iceberg(self) -> list[str]:
        """Iceberg reads whose rows are not those of their snapshot: an acknowledged append of its
        ancestry missing, one of another snapshot present, or a row twice."""
        wrong: list[str] = []
        for lineage, ids in self.ledger.iceberg_reads:
            seen = Counter(ids)
            for row, snapshot in self.ledger.acked.items():
                if (snapshot in lineage) != (seen[row] > 0):
                    wrong.append(
                        f"{row} of snapshot {snapshot}: {'missing' if snapshot in lineage else 'extra'}"
                    )
            wrong += [f"{row} twice" for row, count in seen.items() if count > 1]
        return wrong

    @property
    def hung(self) -> list[Answer]:
        return [a for a in self.answers if a.elapsed > HUNG]

    def status_counts(self) -> dict[str, Counter[str]]:
        """Per fault (and `calm` between them): surface and status (or failure) the clients saw."""
        counts: dict[str, Counter[str]] = {}
        for answer in self.answers:
            surface = answer.path.split("/")[1] if answer.path.count("/") else answer.path
            seen = str(answer.status) if answer.status is not None else answer.failure
            counts.setdefault(self.phase_of(answer), Counter())[f"{surface} {seen}"] += 1
        return counts

    def phase_of(self, answer: Answer) -> str:
        """The fault an answer's request was in flight in, at any time of it (a black hole holds
        requests), else `calm`."""
        return self.phase_at(answer.at, answer.at + answer.elapsed)

    def phase_at(self, began: float, ended: float) -> str:
        return next((r.name for r in self.runs if began <= r.ended and ended >= r.started), "calm")

    def longest_waits(self) -> dict[str, float]:
        """The longest a client waited for an answer (or its failure), per phase."""
        waits: dict[str, float] = {}
        for answer in self.answers:
            phase = self.phase_of(answer)
            waits[phase] = max(waits.get(phase, 0.0), answer.elapsed)
        return waits

    def report(self) -> str:
        lines = [
            f"faults across replicas: {self.seconds:.0f} s, {len(self.runs)} faults of {FAULT_SECONDS:.0f} s"
        ]
        waits = self.longest_waits()
        for phase, counts in sorted(self.status_counts().items()):
            seen = ", ".join(f"{k} × {v}" for k, v in sorted(counts.items()))
            lines.append(f"  {phase} (longest wait {waits[phase]:.1f} s): {seen}")
        for run in self.runs:
            times = ", ".join(f"{url.rsplit(':', 1)[1]} {s:.1f} s" for url, s in run.recovery.items())
            lines.append(f"  recovery after {run.name}: {times or 'none'}")
        ledger = self.ledger
        lines += [
            f"  appends acknowledged {len(ledger.acked) // 3}, failed {len(ledger.failed) // 3}; "
            f"lost {len(self.lost)}, doubled {len(self.doubled)} rows",
            f"  reads: delta {ledger.delta_reads} (wrong {len(ledger.wrong_delta)}), iceberg "
            f"{len(ledger.iceberg_reads)} (wrong {len(self.wrong_iceberg)})",
            f"  tokens revoked {ledger.revoked}, served after {REVOKED_WITHIN:.0f} s: "
            f"{len(ledger.revocation_misses)}",
            f"  answers {len(self.answers)}, over {HUNG:.0f} s: {len(self.hung)}; stuck client threads "
            f"{self.stuck_threads}; error answers out of their model: {len(model_violations(self.answers))}",
            "  client failures: "
            + ", ".join(f"{k} × {v}" for k, v in sorted(ledger.client_failures.items())),
            *(
                f"    first {kind} ({self.phase_at(at, at)}): {message}"
                for kind, (at, message) in sorted(ledger.failure_examples.items())
            ),
            f"  5xx other than 503: {len(self.server_errors)}; answers audited otherwise: "
            f"{len(self.audit_mismatches)}; version 0 after the faults: "
            f"{sorted(str(status) for status in set(self.version_zero.values()))}",
            "  open descriptors: "
            + ", ".join(f"{u.rsplit(':', 1)[1]} {n}" for u, n in self.descriptors.items())
            + "; connections through the proxies: "
            + ", ".join(f"{name} {n}" for name, n in self.proxied.items()),
            "  RSS MiB (before → after): "
            + ", ".join(
                f"{u.rsplit(':', 1)[1]} {self.rss_before.get(u, 0) / 1024:.0f} → {k / 1024:.0f}"
                for u, k in self.rss.items()
            ),
        ]
        return "\n".join(lines)


def failed_checks(outcome: Outcome) -> list[str]:
    """What must hold, each as one line when it did not."""
    failures: list[str] = []
    if outcome.lost:
        failures.append(f"acknowledged appends lost: {outcome.lost[:5]}")
    if outcome.doubled:
        failures.append(f"rows doubled: {outcome.doubled[:5]}")
    if outcome.ledger.wrong_delta:
        failures.append(f"Delta answers not of their version: {outcome.ledger.wrong_delta[:5]}")
    if outcome.wrong_iceberg:
        failures.append(f"Iceberg reads not of their snapshot: {outcome.wrong_iceberg[:5]}")
    for fault in outcome.runs:
        slow = {u: s for u, s in fault.recovery.items() if s > RECOVERY_LIMIT}
        if slow or len(fault.recovery) < 3:
            failures.append(f"{fault.name}: recovery {fault.recovery}")
    if not all(outcome.alive.values()):
        failures.append(f"replicas exited: {outcome.alive}")
    if outcome.hung or outcome.stuck_threads:
        failures.append(f"hung: {len(outcome.hung)} answers, {outcome.stuck_threads} threads")
    if outcome.ledger.revocation_misses:
        failures.append(f"revoked tokens served: {outcome.ledger.revocation_misses[:5]}")
    violations = model_violations(outcome.answers)
    if violations:
        failures.append(f"{len(violations)} error answers out of model: {sorted(set(violations))[:8]}")
    if outcome.server_errors:
        failures.append(f"{len(outcome.server_errors)} 5xx not 503: {sorted(set(outcome.server_errors))[:8]}")
    if outcome.audit_mismatches:
        mismatches = sorted(set(outcome.audit_mismatches))[:8]
        failures.append(f"{len(outcome.audit_mismatches)} answers audited otherwise: {mismatches}")
    if set(outcome.version_zero.values()) != {200}:
        failures.append(f"version 0 of the table shared while empty: {outcome.version_zero}")
    return failures
