"""The body of an S3 batch delete (`POST /{bucket}?delete`, DeleteObjects), read to learn every key
it names: a remote signer signs one only if each is inside what the grant allows, and signs the
body's hash with it (`x-amz-content-sha256`), so that the store refuses any other body.

Only the plain form is taken: `<Delete>` holding `<Object><Key>…</Key></Object>` elements (at most
S3's 1,000) and an optional `<Quiet>`; a version id, a conditional field, or anything else refuses
the body, as a query naming versions refuses a single delete. No DTD or entity is read (a body with
`<!` is refused before parsing), so a body cannot expand past its size.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

#: S3's own limit of keys per DeleteObjects.
MAX_KEYS = 1000
MAX_BODY_BYTES = 1024 * 1024
S3_NAMESPACE = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class BatchRefused(Exception):
    """A batch delete body this signer will not sign; the message says why."""


def _name(tag: str) -> str:
    """An element's name without S3's namespace (the only one taken); another namespace refuses."""
    if tag.startswith("{"):
        if not tag.startswith(S3_NAMESPACE):
            raise BatchRefused("the batch delete is in an XML namespace that is not S3's")
        return tag[len(S3_NAMESPACE) :]
    return tag


def deleted_keys(body: bytes) -> list[str]:
    """The keys a DeleteObjects body names, in its order; `BatchRefused` for anything else."""
    if len(body) > MAX_BODY_BYTES:
        raise BatchRefused("the batch delete's body is too long")
    if b"<!" in body:
        raise BatchRefused("a batch delete is signed without a DTD, entities or comments")
    try:
        # No DTD, so no entity to expand or fetch (refused above); expat bounds the rest.
        root = ElementTree.fromstring(body)  # noqa: S314
    except ElementTree.ParseError:
        raise BatchRefused("the batch delete's body is not XML") from None
    if _name(root.tag) != "Delete" or root.attrib:
        raise BatchRefused("the batch delete's body is not one <Delete>")
    if (root.text or "").strip() or any((child.tail or "").strip() for child in root):
        raise BatchRefused("the batch delete's body holds text outside its elements")
    keys: list[str] = []
    for child in root:
        name = _name(child.tag)
        if name == "Quiet" and not len(child) and (child.text or "").strip() in ("true", "false"):
            continue
        if name != "Object" or child.attrib or len(child) != 1 or _name(child[0].tag) != "Key":
            raise BatchRefused("a batch delete is signed with <Object><Key> elements and <Quiet> only")
        key = child[0]
        if key.attrib or len(key) or not key.text:
            raise BatchRefused("each <Key> of a batch delete holds one key")
        keys.append(key.text)
    if not keys or len(keys) > MAX_KEYS:
        raise BatchRefused(f"a batch delete names 1 to {MAX_KEYS} keys")
    return keys
