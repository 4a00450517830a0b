"""Independent reader of a table's history: PyIceberg (SqlCatalog).

Loads NS.T, and prints one JSON object with what its metadata.json says of the history:

  {"metadata_location", "format_version", "last_sequence_number",
   "snapshot_ids": sorted ids, "history": snapshot-log ids in order,
   "refs": {NAME: snapshot id}, "metadata_log": previous metadata files in order,
   "snapshots": {ID: {"parent", "sequence_number", "timestamp_ms", "operation"}}}

Exits 1 with a one-line message on stderr if the table cannot be read.
"""
import json

from read_table import load_table, run_cli, table_parser


def main() -> None:
    args = table_parser(__doc__).parse_args()
    table = load_table(args)
    md = table.metadata
    snapshots = {
        str(s.snapshot_id): {
            "parent": s.parent_snapshot_id,
            "sequence_number": s.sequence_number,
            "timestamp_ms": s.timestamp_ms,
            "operation": s.summary.operation.value if s.summary else None,
        }
        for s in md.snapshots
    }
    print(json.dumps({
        "metadata_location": table.metadata_location,
        "format_version": md.format_version,
        "last_sequence_number": getattr(md, "last_sequence_number", 0),  # v1 has none: 0, as in Java
        "snapshot_ids": sorted(s.snapshot_id for s in md.snapshots),
        "history": [e.snapshot_id for e in md.snapshot_log],
        "refs": {name: r.snapshot_id for name, r in md.refs.items()},
        "metadata_log": [e.metadata_file for e in md.metadata_log],
        "snapshots": snapshots,
    }))


if __name__ == "__main__":
    run_cli(main, "read_history.py")
