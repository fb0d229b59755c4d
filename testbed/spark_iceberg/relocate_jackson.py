"""Builds the shaded Jackson jar that Iceberg's Spark runtime jar expects, from plain Jackson jars.

Iceberg's runtime jar is built against Jackson relocated into `org.apache.iceberg.shaded`
and ships without it in the PyPI wheel `snowpark-connect-deps-iceberg`; without that jar
Spark fails on the first Iceberg table with `NoClassDefFoundError`. The wheel
`snowpark-connect-deps-2` has Jackson's own jars. This script renames their classes into the
shaded package, as Maven's shade plugin would, with nothing but the standard library:

- each class file's name moves to `org/apache/iceberg/shaded/com/fasterxml/jackson/...`;
- in each class file, every UTF-8 constant naming Jackson (type descriptors, class names,
  reflective names in dotted form) is rewritten, and the rest of the constant pool and the
  code are copied as they are (constants are referred to by index, not by offset);
- Jackson's `META-INF/services` files are renamed and rewritten; the rest of `META-INF`
  (manifests, signatures, `module-info` of multi-release jars) is left out, as shading does.

    python relocate_jackson.py WHEEL OUT_JAR

WHEEL is the `snowpark-connect-deps-2` wheel; its `jackson-core`, `jackson-databind` and
`jackson-annotations` jars are read from inside it.
"""

from __future__ import annotations

import io
import struct
import sys
import zipfile
from collections.abc import Callable, Iterator
from fnmatch import fnmatch
from pathlib import Path

#: Jackson's packages, in class-file (slashed) and Java (dotted) spelling, and where they go.
RELOCATIONS = (
    (b"com/fasterxml/jackson", b"org/apache/iceberg/shaded/com/fasterxml/jackson"),
    (b"com.fasterxml.jackson", b"org.apache.iceberg.shaded.com.fasterxml.jackson"),
)
#: The jars of the wheel that Iceberg's runtime needs (databind needs core and annotations).
JACKSON_JARS = ("jackson-core-", "jackson-databind-", "jackson-annotations-")
SERVICES = "META-INF/services/"

#: Constant pool tags (JVM specification, 4.4) and the size of their entry after the tag byte.
UTF8 = 1
LONG, DOUBLE = 5, 6
FIXED_SIZES = {
    3: 4,  # Integer
    4: 4,  # Float
    LONG: 8,
    DOUBLE: 8,
    7: 2,  # Class
    8: 2,  # String
    9: 4,  # Fieldref
    10: 4,  # Methodref
    11: 4,  # InterfaceMethodref
    12: 4,  # NameAndType
    15: 3,  # MethodHandle
    16: 2,  # MethodType
    17: 4,  # Dynamic
    18: 4,  # InvokeDynamic
    19: 2,  # Module
    20: 2,  # Package
}
#: Magic, minor and major version come before the constant pool's count.
POOL_COUNT_AT = 8


def relocate(text: bytes) -> bytes:
    """`text` with Jackson's package names moved into Iceberg's shaded package, once."""
    if any(new in text for _, new in RELOCATIONS):  # already relocated: would nest the prefix
        return text
    for old, new in RELOCATIONS:
        text = text.replace(old, new)
    return text


def relocate_class(data: bytes, relocate: Callable[[bytes], bytes] = relocate) -> bytes:
    """A class file with its UTF-8 constants relocated (by `relocate`: Jackson's, by default).

    Only the constant pool changes size, and nothing in a class file points at a byte
    offset inside it, so everything after the pool is copied unchanged.
    """
    (count,) = struct.unpack_from(">H", data, POOL_COUNT_AT)
    out = [data[: POOL_COUNT_AT + 2]]
    at, index = POOL_COUNT_AT + 2, 1  # entries are numbered from 1
    while index < count:
        tag = data[at]
        if tag == UTF8:
            (length,) = struct.unpack_from(">H", data, at + 1)
            text = relocate(data[at + 3 : at + 3 + length])
            out.append(struct.pack(">BH", UTF8, len(text)) + text)
            at += 3 + length
        else:
            size = 1 + FIXED_SIZES[tag]
            out.append(data[at : at + size])
            at += size
        index += 2 if tag in (LONG, DOUBLE) else 1  # 8-byte constants take two slots
    out.append(data[at:])
    return b"".join(out)


def relocated_entries(jar: zipfile.ZipFile) -> Iterator[tuple[str, bytes]]:
    """The (name, content) entries of one Jackson jar, as they go into the shaded jar."""
    for entry in jar.infolist():
        name = entry.filename
        if entry.is_dir():
            continue
        if name.startswith(SERVICES):
            service = name.removeprefix(SERVICES)
            if service.startswith("com.fasterxml.jackson"):
                yield SERVICES + relocate(service.encode()).decode(), relocate(jar.read(entry))
            continue
        if name.startswith("META-INF/") or name.endswith("module-info.class"):
            continue
        data = jar.read(entry)
        if name.endswith(".class"):
            data = relocate_class(data)
        yield relocate(name.encode()).decode(), data


def jackson_jars(wheel: zipfile.ZipFile) -> Iterator[zipfile.ZipFile]:
    """Jackson's core, databind and annotations jars inside the `snowpark-connect-deps-2` wheel."""
    for prefix in JACKSON_JARS:
        found = [name for name in wheel.namelist() if fnmatch(Path(name).name, f"{prefix}*.jar")]
        if len(found) != 1:
            raise SystemExit(f"expected one {prefix}*.jar in {wheel.filename}, found {found}")
        yield zipfile.ZipFile(io.BytesIO(wheel.read(found[0])))


def build(wheel_path: Path, out: Path) -> None:
    """Writes the shaded jar to `out` (through a temporary file, so a failed run leaves none)."""
    draft = out.with_name(out.name + ".part")
    written: set[str] = set()
    with zipfile.ZipFile(wheel_path) as wheel, zipfile.ZipFile(draft, "w", zipfile.ZIP_DEFLATED) as shaded:
        for jar in jackson_jars(wheel):
            for name, data in relocated_entries(jar):
                if name not in written:  # a class is in one jar only; a shared file goes in once
                    shaded.writestr(name, data)
                    written.add(name)
    draft.replace(out)


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit(__doc__)
    build(Path(argv[0]), Path(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
