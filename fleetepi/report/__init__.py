"""``fleetepi report``: one self-contained HTML page of what the archive knows."""
