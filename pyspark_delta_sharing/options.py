"""What a `deltaSharing` read is asked for: the table's URL and the reader's options, parsed.

Its own module so that the batch source (`source`) and the stream (`streaming`)
both import it and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark_delta_sharing.listing import RESPONSE_FORMATS

if TYPE_CHECKING:
    from delta_sharing.protocol import DeltaSharingProfile, Table


def parse_url(url: str) -> tuple[str, Table]:
    """`<profile>#<share>.<schema>.<table>` → (profile path, table)."""
    from delta_sharing.protocol import Table

    profile, sep, name = url.rpartition("#")
    parts = name.split(".")
    if not sep or not profile or len(parts) != 3 or not all(parts):
        raise ValueError(f"Invalid deltaSharing path {url!r}: expected <profile>#<share>.<schema>.<table>")
    return profile, Table(name=parts[2], share=parts[0], schema=parts[1])


@dataclass(frozen=True)
class ReadOptions:
    profile: DeltaSharingProfile
    table: Table
    version: int | None = None
    timestamp: str | None = None
    change_feed: bool = False
    cdf: dict[str, Any] = field(default_factory=dict)
    #: `delta,parquet` (the server picks per table), `parquet` or `delta`.
    response_format: str = "delta,parquet"
    push_filters: bool = True

    @classmethod
    def parse(cls, options: dict[str, str]) -> ReadOptions:
        from delta_sharing.protocol import DeltaSharingProfile

        lowered = {key.lower(): value for key, value in options.items()}
        path = lowered.get("path")
        if not path:
            raise ValueError("deltaSharing needs a path: load('<profile>#<share>.<schema>.<table>')")
        profile_path, table = parse_url(path)
        response_format = ",".join(
            part.strip() for part in lowered.get("responseformat", "delta,parquet").lower().split(",")
        )
        if response_format == "parquet,delta":
            response_format = "delta,parquet"
        if response_format not in RESPONSE_FORMATS:
            raise ValueError(f"responseFormat {response_format!r}: expected parquet, delta or delta,parquet")
        # A stream may start at "latest" (StreamOptions reads it); no change-feed read does.
        starting = lowered.get("startingversion")
        cdf = {
            "starting_version": None if (starting or "").strip().lower() == "latest" else _int(starting),
            "ending_version": _int(lowered.get("endingversion")),
            "starting_timestamp": lowered.get("startingtimestamp"),
            "ending_timestamp": lowered.get("endingtimestamp"),
        }
        return cls(
            profile=DeltaSharingProfile.read_from_file(profile_path),
            table=table,
            version=_int(lowered.get("versionasof")),
            timestamp=lowered.get("timestampasof"),
            change_feed=lowered.get("readchangefeed", "false").lower() == "true",
            cdf=cdf,
            response_format=response_format,
            push_filters=lowered.get("pushfilters", "true").lower() != "false",
        )


def _int(value: str | None) -> int | None:
    return None if value is None or value == "" else int(value)
