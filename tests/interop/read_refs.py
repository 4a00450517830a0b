"""Independent reader of a table's snapshot references: PyIceberg (SqlCatalog).

Loads NS.T, and prints one JSON object:

  {"refs": {NAME: {"type", "snapshot_id", "max_ref_age_ms", "max_snapshot_age_ms",
                   "min_snapshots_to_keep"}},
   "read": {NAME: {"snapshot_id", "rows", "sum"}}}

`read` holds, for each --read NAME, the snapshot PyIceberg resolves for the ref
(`snapshot_by_name`) and the rows and the sum of --sum-column it reads at that snapshot.
Exits 1 with a one-line message on stderr if the table cannot be read.
"""
import json

from read_table import load_table, run_cli, table_parser


def main() -> None:
    p = table_parser(__doc__)
    p.add_argument("--read", action="append", default=[], help="a ref to read (repeatable)")
    p.add_argument("--sum-column", default="id")
    args = p.parse_args()

    table = load_table(args)
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
