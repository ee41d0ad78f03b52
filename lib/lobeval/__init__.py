"""lobeval: test a line-of-business chatbot by what it does, not only by what it says."""
from lobeval.errors import ConfigError, LobevalError, RecordError, RoleError

__all__ = ["ConfigError", "LobevalError", "RecordError", "RoleError"]
__version__ = "0.1.0"
