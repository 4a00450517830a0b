"""Independent time-travel reader: PyIceberg (SqlCatalog) at snapshots, refs and times.

Loads NS.T and prints one JSON object:

  {"snapshot": {ID: READ}, "ref": {NAME: READ}, "timestamp": {MS: READ}}

READ is {"snapshot_id", "columns", "rows", "sum", "files", "checksum"} for what PyIceberg
reads at that point: `scan(snapshot_id=ID)`, the snapshot `snapshot_by_name(NAME)` names,
and the snapshot `snapshot_as_of_timestamp(MS)` finds (null when there is none). The
checksum is read_table.py's order-independent content hash. Exits 1 with a one-line
message on stderr if the table cannot be read.
"""
import json

from read_table import load_table, run_cli, summarize, table_parser


def read_at(table, snapshot_id, sum_column):
    if snapshot_id is None:
        return None
    scan = table.scan(snapshot_id=snapshot_id)
    tbl = scan.to_arrow()
    files = sum(1 for _ in scan.plan_files())
    out = summarize(tbl, tbl.column_names, sum_column, files)
    out["snapshot_id"] = snapshot_id
    out["columns"] = tbl.column_names
    return out


def main() -> None:
    p = table_parser(__doc__)
    p.add_argument("--snapshot", action="append", type=int, default=[])
    p.add_argument("--ref", action="append", default=[])
    p.add_argument("--timestamp-ms", action="append", type=int, default=[])
    p.add_argument("--sum-column", default="id")
    args = p.parse_args()

    table = load_table(args)
    out = {"snapshot": {}, "ref": {}, "timestamp": {}}
    for sid in args.snapshot:
        out["snapshot"][str(sid)] = read_at(table, sid, args.sum_column)
    for name in args.ref:
        snap = table.snapshot_by_name(name)
        out["ref"][name] = read_at(table, snap.snapshot_id if snap else None, args.sum_column)
    for ms in args.timestamp_ms:
        snap = table.snapshot_as_of_timestamp(ms)
        out["timestamp"][str(ms)] = read_at(table, snap.snapshot_id if snap else None, args.sum_column)
    print(json.dumps(out))


if __name__ == "__main__":
    run_cli(main, "read_as_of.py")
