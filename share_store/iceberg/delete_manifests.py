"""A writer of v2 delete manifests: pyiceberg 0.12 writes data manifests only.

Used where this server writes delete files into Iceberg metadata itself: the Delta tables it shows
as Iceberg (`delta_metadata`) and compaction's dangling deletes (`maintenance.compaction.commit`).
"""

from __future__ import annotations

from pyiceberg.manifest import ManifestContent, ManifestWriterV2


class DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg's v2 manifest writer, for a manifest of delete files."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}
