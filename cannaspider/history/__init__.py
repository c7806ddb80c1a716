"""The snapshot history in two tiers (docs/history.md): recent months in PostgreSQL's monthly
partitions of product_snapshots, older ones as Parquet files in HISTORY_ARCHIVE_STORE, listed by
the table history_archive (migrations/032_history_archive.sql). archive.py moves a month between
the tiers, reader.py reads the cold one back for the history API and the exports."""
