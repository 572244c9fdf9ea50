"""Results store: one SQLite file of runs and rows (one row per benchmark cell), JSON export/import."""

from ampbench.store.derive import derive
from ampbench.store.exchange import export_data, import_document, import_file, json_text, read_export, to_csv, write_json
from ampbench.store.row_keys import DERIVED_KEYS, ROW_KEYS, STATUSES, empty_row
from ampbench.store.sqlite import SCHEMA_VERSION, RunInfo, Store, default_db_path

__all__ = ["DERIVED_KEYS", "ROW_KEYS", "SCHEMA_VERSION", "STATUSES", "RunInfo", "Store", "default_db_path", "derive",
           "empty_row", "export_data", "import_document", "import_file", "json_text", "read_export", "to_csv",
           "write_json"]
