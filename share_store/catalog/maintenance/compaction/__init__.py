"""Compaction: a table's small files, and the files its deletes apply to, rewritten near a target size.

One run (`run.compact`) goes through the modules here in order:

- `plan`: what to compact, from the current snapshot's scan tasks (pure): per partition, the data
  files smaller than three quarters of the target, and any file a delete applies to; a partition
  is rewritten when it has two such files or one with deletes. A partition's files are split
  into groups of at most `plan.GROUP_TARGETS` targets of input, so that a run stopped by its
  budget still commits whole groups.
- `inputs`: each input file (and its delete files) measured from its footer before any of its
  rows are read, within the provider's `Limits` whatever the table says, then read in batches of
  about 16 MiB decoded with its deletes applied; a file past the bounds is left as it is and
  named in the result.
- `rewrite`: a group's rows written into new files rolled at the target size, sorted by the
  table's sort order where it has one (identity and order-preserving transforms, up to the first
  that is not), a row group of the output held at a time.
- `commit`: the groups rewritten committed as one `replace` snapshot through the catalog's
  compare-and-swap, with a writer's commit meanwhile never lost (`commit.commit_groups`), and the
  delete files left dangling by the rewrite (`dangling`) removed in the same commit.
- `run`: the run within its budget (`budget.Budget`: stopped between two batches, the group it was
  writing deleted, the groups it finished committed) and its report, `Compacted`.

Tables with equality deletes are left alone (pyiceberg 0.12 cannot apply them), and so are tables
of format v3 (it cannot write their manifests). pyiceberg 0.12 has no rewrite of data files (only
Spark has): the snapshot is made with its own `_OverwriteFiles` producer under Iceberg's `replace`
operation, which changes no data: readers of changes skip it.
"""
