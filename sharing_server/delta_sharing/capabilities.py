"""The `delta-sharing-capabilities` header: response formats, reader features, end-of-stream action.

Which response format a table is answered in is decided here, from what the
client lists and the table's reader version.
"""

from __future__ import annotations

from dataclasses import dataclass

from share_store.errors import InvalidParameter

# -- capabilities header -------------------------------------------------------


@dataclass(frozen=True)
class Capabilities:
    response_formats: tuple[str, ...] = ("parquet",)
    reader_features: frozenset[str] = frozenset()
    include_end_stream_action: bool = False
    #: `asyncquery=true` (2026-07): a `/query` may be answered `pending`, then polled by its id.
    async_query: bool = False

    @classmethod
    def parse(cls, header: str | None) -> Capabilities:
        if not header:
            return cls()
        values: dict[str, list[str]] = {}
        for entry in header.lower().split(";"):
            parts = entry.split("=")
            if len(parts) != 2:
                continue  # the reference drops malformed entries too
            values[parts[0].strip()] = [v.strip() for v in parts[1].split(",") if v.strip()]
        formats = tuple(values.get("responseformat") or ["parquet"])
        return cls(
            response_formats=formats,
            reader_features=frozenset(values.get("readerfeatures", [])),
            include_end_stream_action=values.get("includeendstreamaction") == ["true"],
            async_query=values.get("asyncquery") == ["true"],
        )

    def response_format(self, min_reader_version: int, prefer_delta: bool = False) -> str:
        """The format to answer in (protocol notes §2.3).

        Only `delta` → delta; only `parquet` → parquet; both → parquet when the
        table needs nothing beyond reader version 1, else delta. With
        `prefer_delta`, a client that lists `delta` first gets delta for those
        tables too: the Python client's default call (`load_as_pandas` resolving
        the format, `delta,parquet`) reads them faster that way. Delta Lake's
        Spark connector lists `parquet,delta` and keeps the reference's answer.
        """
        formats = set(self.response_formats)
        unknown = formats - {"parquet", "delta"}
        if unknown:
            raise InvalidParameter(
                f"Unsupported responseformat: {', '.join(sorted(unknown))}. Supported: parquet, delta"
            )
        if formats == {"delta"}:
            return "delta"
        if formats == {"parquet"}:
            return "parquet"
        if prefer_delta and self.response_formats[0] == "delta":
            return "delta"
        return "parquet" if min_reader_version == 1 else "delta"


def parse_file_id_hash(header: str | None) -> str | None:
    if header is None:
        return None
    value = header.strip().lower()
    if value not in ("parquet", "delta"):
        raise InvalidParameter(f"Unsupported fileidhash: '{header}'. Supported: parquet, delta")
    return value
