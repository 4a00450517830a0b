"""Independent reader for an Iceberg table in a REST catalog on S3: PyIceberg and DuckDB.

Loads NS.T with PyIceberg's RestCatalog (OAuth client credentials, S3 with path-style
addressing, as SeaweedFS `weed mini` serves them), then reads the current snapshot twice,
once with PyIceberg and once with DuckDB's iceberg extension (offline: httpfs, iceberg and
avro loaded from their pip packages; an S3 secret; iceberg_scan of the metadata file the
catalog points at), and prints one JSON object:

  {"metadata_location": ..., "pyiceberg": {"rows", "sum", "files", "checksum"},
   "duckdb": {"rows", "sum", "files", "checksum"}}

Fields as in read_table.py. Every connection flag defaults to the matching variable that
.ci/setup exports (FLOE_TEST_REST_URI, ...). Exits 1 with a one-line message on stderr if
the table cannot be read.
"""
import argparse
import json
import os
import sys
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from read_table import duckdb_connect, read_both, run_cli  # noqa: E402

# flag -> (environment variable from .ci/setup, help)
REST_FLAGS = {
    "--uri": ("FLOE_TEST_REST_URI", "REST catalog URI, e.g. http://127.0.0.1:8181"),
    "--warehouse": ("FLOE_TEST_REST_WAREHOUSE", "warehouse (SeaweedFS: the table bucket, e.g. warehouse)"),
    "--credential": ("FLOE_TEST_REST_CREDENTIAL", "OAuth client credentials CLIENT:SECRET"),
    "--s3-endpoint": ("FLOE_TEST_S3_ENDPOINT", "S3 endpoint URL, e.g. http://127.0.0.1:8333"),
    "--s3-access-key": ("FLOE_TEST_S3_ACCESS_KEY", "S3 access key id"),
    "--s3-secret-key": ("FLOE_TEST_S3_SECRET_KEY", "S3 secret access key"),
    "--s3-region": ("FLOE_TEST_S3_REGION", "S3 region, e.g. us-east-1"),
}


def add_rest_args(p: argparse.ArgumentParser) -> None:
    for flag, (env, help_) in REST_FLAGS.items():
        p.add_argument(flag, default=os.environ.get(env), help=f"{help_} (default: ${env})")


def check_rest_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    missing = [f for f in REST_FLAGS if getattr(args, f[2:].replace("-", "_")) in (None, "")]
    if missing:
        p.error("missing " + ", ".join(f"{f} (or ${REST_FLAGS[f][0]})" for f in missing))


def open_rest_catalog(args: argparse.Namespace, name: str = "rest"):
    """A PyIceberg RestCatalog. The catalog's own S3 settings are passed explicitly: PyIceberg
    asks for vended credentials, and SeaweedFS then answers LoadTable with an empty config."""
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog(name, **{
        "uri": args.uri,
        "warehouse": args.warehouse,
        "credential": args.credential,  # exchanged for a bearer token (client_credentials)
        "oauth2-server-uri": args.uri.rstrip("/") + "/v1/oauth/tokens",
        "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
        "s3.endpoint": args.s3_endpoint,
        "s3.access-key-id": args.s3_access_key,
        "s3.secret-access-key": args.s3_secret_key,
        "s3.region": args.s3_region,
        "s3.force-virtual-addressing": "false",  # path-style: http://host:port/bucket/key
    })


def duckdb_s3_connect(args: argparse.Namespace):
    """DuckDB with httpfs + iceberg + avro, offline, and an S3 secret for the endpoint."""
    con = duckdb_connect(("httpfs", "avro", "iceberg"))
    ep = urlparse(args.s3_endpoint)
    if not ep.netloc:
        raise ValueError(f"--s3-endpoint must be a URL like http://host:port, not {args.s3_endpoint!r}")

    def q(s: str) -> str:
        return "'" + s.replace("'", "''") + "'"

    con.execute(
        f"CREATE SECRET floe_s3 (TYPE s3, KEY_ID {q(args.s3_access_key)}, SECRET {q(args.s3_secret_key)}, "
        f"REGION {q(args.s3_region)}, ENDPOINT {q(ep.netloc)}, URL_STYLE 'path', "
        f"USE_SSL {'true' if ep.scheme == 'https' else 'false'})"
    )
    return con


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_rest_args(p)
    p.add_argument("--table", required=True, help="NS.T")
    p.add_argument("--sum-column")
    args = p.parse_args()
    check_rest_args(p, args)

    table = open_rest_catalog(args).load_table(args.table)
    print(json.dumps(read_both(table, args.table, table.metadata_location, args.sum_column,
                               duckdb_s3_connect(args))))


if __name__ == "__main__":
    run_cli(main, "read_rest.py")
