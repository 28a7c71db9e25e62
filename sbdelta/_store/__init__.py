"""sbdelta's storage seam: the only code that touches Delta tables (see schema.py)."""
