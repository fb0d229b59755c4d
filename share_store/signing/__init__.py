"""Every signature the server makes or checks, behind one seam.

* `file_urls`: HMAC-signed, expiring URLs of files served from local storage;
* `sigv4`: SigV4 query-string presigning of S3 GET URLs (the hot path);
* `request_signing`: SigV4 header signing of one S3 request, for Iceberg remote signing;
* `delegation`: Iceberg REST access delegation (remote signing or vended keys), for both catalogs;
* `token_codec`: tamper-proof, expiring tokens (page tokens, refresh tokens, console sessions);
* `hmac_pads`: HMAC-SHA256 with the key's pads hashed once, which the first two share.
"""
