"""Builds HttpClient 5 relocated where Iceberg's Spark runtime jar looks for it (`iceberg-httpclient5.jar`).

The runtime jar of `snowpark-connect-deps-iceberg` ships without its shaded HttpClient 5
(as without Jackson, see `relocate_jackson.py`): Iceberg's REST catalog client then fails
with `NoClassDefFoundError: org/apache/iceberg/shaded/org/apache/hc/core5/http/Method`.
Debian's HttpClient 5.2 jars (packages libhttpclient5-java and libhttpcore5-java, which
`make spark-iceberg` installs), relocated, serve plain-HTTP catalogs; 5.2 lacks one 5.4
interface Iceberg names when it configures TLS, added empty, so HTTPS catalogs are not served.

Usage: python relocate_httpclient5.py OUT_JAR
"""

from __future__ import annotations

import struct
import sys
import zipfile
from pathlib import Path

from relocate_jackson import SERVICES, UTF8, relocate_class

#: Debian's HttpClient 5 jars (packages libhttpclient5-java and libhttpcore5-java).
DEBIAN_HTTPCLIENT5 = tuple(Path("/usr/share/java") / name
                           for name in ("httpclient5.jar", "httpcore5.jar", "httpcore5-h2.jar"))  # fmt: skip
HTTPCLIENT5_JAR = "iceberg-httpclient5.jar"
HC = (b"org/apache/hc/", b"org/apache/iceberg/shaded/org/apache/hc/")
HC_DOTTED = (b"org.apache.hc.", b"org.apache.iceberg.shaded.org.apache.hc.")
#: An interface of HttpClient 5.4 that Iceberg's HTTPClient names (only when it configures TLS):
#: the verifier loads it, so 5.2 needs an empty one.
TLS_SOCKET_STRATEGY = "org/apache/iceberg/shaded/org/apache/hc/client5/http/ssl/TlsSocketStrategy"


def relocate_hc(text: bytes) -> bytes:
    if HC[1] in text or HC_DOTTED[1] in text:
        return text
    return text.replace(HC[0], HC[1]).replace(HC_DOTTED[0], HC_DOTTED[1])


def empty_interface(name: str) -> bytes:
    """The class file of `public interface NAME {}` (Java 8 format)."""

    def utf8(text: str) -> bytes:
        return struct.pack(">BH", UTF8, len(text)) + text.encode()

    pool = [struct.pack(">BH", 7, 2), utf8(name), struct.pack(">BH", 7, 4), utf8("java/lang/Object")]
    header = struct.pack(">IHHH", 0xCAFEBABE, 0, 52, len(pool) + 1)
    # public abstract interface; this = #1, super = #3; no interfaces, fields, methods, attributes
    return header + b"".join(pool) + struct.pack(">7H", 0x0601, 1, 3, 0, 0, 0, 0)


def build(out: Path) -> None:
    """Write the relocated jar to `out` (whole or not at all)."""
    missing = [str(jar) for jar in DEBIAN_HTTPCLIENT5 if not jar.is_file()]
    if missing:
        raise SystemExit(
            f"{', '.join(missing)} missing: apt-get install libhttpclient5-java libhttpcore5-java"
        )
    draft = out.with_name(out.name + ".part")
    written: set[str] = set()
    with zipfile.ZipFile(draft, "w", zipfile.ZIP_DEFLATED) as shaded:
        for path in DEBIAN_HTTPCLIENT5:
            with zipfile.ZipFile(path) as jar:
                for entry in jar.infolist():
                    name, data = entry.filename, jar.read(entry)
                    if entry.is_dir() or name.endswith("module-info.class"):
                        continue
                    if name.startswith(SERVICES):
                        name = SERVICES + relocate_hc(name.removeprefix(SERVICES).encode()).decode()
                        data = relocate_hc(data)
                    elif name.startswith("META-INF/"):
                        continue
                    elif name.endswith(".class"):
                        name, data = relocate_hc(name.encode()).decode(), relocate_class(data, relocate_hc)
                    if name not in written:
                        shaded.writestr(name, data)
                        written.add(name)
        shaded.writestr(TLS_SOCKET_STRATEGY + ".class", empty_interface(TLS_SOCKET_STRATEGY))
    draft.replace(out)


if __name__ == "__main__":
    build(Path(sys.argv[1]))
