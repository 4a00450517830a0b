"""Independent reader of a table's snapshot references: PyIceberg (SqlCatalog).

Loads NS.T, and prints one JSON object:

  {"refs": {NAME: {"type", "snapshot_id", "max_ref_age_ms", "max_snapshot_age_ms",
                   "min_snapshots_to_keep"}},
   "read": {NAME: {"snapshot_id", "rows", "sum"}}}

`read` holds, for each --read NAME, the snapshot PyIceberg resolves for the ref
(`snapshot_by_name`) and the rows and the sum of --sum-column it reads at that snapshot.
Exits 1 with a one-line message on stderr if the table cannot be read.
"""
import argparse
import json

from read_table import open_catalog, run_cli


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog-uri", required=True)
    p.add_argument("--catalog-name", default="floe")
    p.add_argument("--warehouse", required=True)
    p.add_argument("--table", required=True, help="NS.T")
    p.add_argument("--read", action="append", default=[], help="a ref to read (repeatable)")
    p.add_argument("--sum-column", default="id")
    args = p.parse_args()

    table = open_catalog(args.catalog_uri, args.catalog_name, args.warehouse).load_table(args.table)
    refs = {}
    for name, r in table.refs().items():
        refs[name] = {
            "type": str(r.snapshot_ref_type.value),
            "snapshot_id": r.snapshot_id,
            "max_ref_age_ms": r.max_ref_age_ms,
            "max_snapshot_age_ms": r.max_snapshot_age_ms,
            "min_snapshots_to_keep": r.min_snapshots_to_keep,
        }
    read = {}
    for name in args.read:
        snap = table.snapshot_by_name(name)
        if snap is None:
            raise ValueError(f"PyIceberg finds no snapshot for ref {name!r}")
        tbl = table.scan(snapshot_id=snap.snapshot_id).to_arrow()
        values = [v for v in tbl.column(args.sum_column).to_pylist() if v is not None]
        read[name] = {"snapshot_id": snap.snapshot_id, "rows": tbl.num_rows, "sum": sum(values)}
    print(json.dumps({"refs": refs, "read": read}))


if __name__ == "__main__":
    run_cli(main, "read_refs.py")
