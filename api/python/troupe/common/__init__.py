"""Framework-independent parts of the Python package."""
