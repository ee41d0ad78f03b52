"""lobeval: test a line-of-business chatbot by what it does, not only by what it says."""
import sys

# jsonschema loads the optional rfc3987-syntax IRI checker if it is installed (Jupyter's extras
# install it), and that compiles a grammar for about 2.5 s on every import: in each stage's kernel
# and each command. lobeval validates no "iri" formats, so the checker is kept from loading.
sys.modules.setdefault("rfc3987_syntax", None)
# papermill (which scrapbook imports in every stage's kernel to glue what a stage hands on) loads its Azure Blob
# Storage handler, azure.storage.blob and azure.identity, on import: over a second. lobeval reads and writes notebooks
# only on local paths; papermill keeps its stand-in that names the missing package should an abs:// path be asked.
sys.modules.setdefault("papermill.abs", None)

from lobeval.core.errors import ConfigError, LobevalError, RecordError, RoleError, TargetUnavailable  # noqa: E402

__all__ = ["ConfigError", "LobevalError", "RecordError", "RoleError", "TargetUnavailable"]
__version__ = "0.1.0"
