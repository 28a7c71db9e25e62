"""The Parquet files delta-rs writes for sbdelta: Snappy-compressed, as Spark writes them
(delta-rs's own default, ZSTD, cost 1.5-2 ms more per small file, which a single settlement's
rewrite pays every time: docs/benchmarks.md). Real delta-rs tables; no Spark."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from sbdelta._store import rs


def _codecs(path, files):
    return {pq.ParquetFile(os.path.join(path, name)).metadata.row_group(0).column(0).compression
            for name in files}


def test_appends_deletes_and_updates_through_delta_rs_write_snappy_files(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"k": pa.array([], pa.string()),
                                    "v": pa.array([], pa.int64())}))
    rs.append(path, ["k", "v"], [("a", 1), ("b", 2), ("c", 3)])
    appended = set(DeltaTable(path).file_uris())
    assert rs.delete(path, "k = 'a'") == 1  # rewrites the file without the row
    assert rs.update(path, {"v": "v + 10"}, "k = 'b'") == 1  # rewrites it again
    table = DeltaTable(path)
    written = [os.path.basename(uri) for uri in table.file_uris()]
    assert written and not set(table.file_uris()) & appended
    assert _codecs(path, written) == {"SNAPPY"}
    log = table.history()
    assert [entry["operation"] for entry in log[:3]] == ["UPDATE", "DELETE", "WRITE"]
    assert sorted(zip(*table.to_pyarrow_table().to_pydict().values())) == [("b", 12), ("c", 3)]
