"""What compaction picks to rewrite, and in which groups: the plan alone (pure)."""

from __future__ import annotations

from share_store.catalog.maintenance.compaction.plan import Candidate, plan

MB = 1024 * 1024


def c(path: str, size: int, partition: str = "a", deletes: int = 0, equality: bool = False) -> Candidate:
    return Candidate(path, size, (0, (partition,)), deletes, equality)


def test_the_plan_packs_small_files_per_partition_and_leaves_big_lone_and_equality_ones() -> None:
    target = 512 * MB
    groups = plan(
        [c("a1", MB), c("a2", 2 * MB), c("big", 500 * MB), c("b1", MB, "b"), c("c1", MB, "c", deletes=1),
         c("d1", MB, "d"), c("e1", MB, "e", equality=True), c("e2", MB, "e")],
        target,
    )  # fmt: skip
    assert [[f.path for f in group] for group in groups] == [["a1", "a2"], ["c1"]]


def test_the_plan_rewrites_a_big_file_a_delete_applies_to() -> None:
    assert [[f.path for f in g] for g in plan([c("big", 500 * MB, deletes=2)], 512 * MB)] == [["big"]]


def test_a_partition_past_four_targets_is_split_into_groups_and_a_lone_rest_joins_the_last() -> None:
    target = 64 * MB
    files = [c(f"f{n:02d}", 40 * MB) for n in range(13)]  # 520 MB: 6 + 6 + 1 files of 40 MB
    groups = plan(files, target)
    assert [len(group) for group in groups] == [6, 7]
    assert [f.path for group in groups for f in group] == [f.path for f in files]
